package sipedge_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sipedge/sipedge"

// forbidden lists, per package (and its subpackages), the import paths (and
// their subpackages) it must not depend on, directly or not. Dependencies
// flow one way: parser, transport and dialog/digest are leaves; the
// carrier plane (carrier) sits on health, ratelimit, route and quality,
// under the call core (dialog); shard alone speaks gnet; fleet stays below
// what uses it; cmd wires. internal/redisurl, what every user of the
// shared Redis agrees on about its URL, is a leaf under them all.
// internal/testtier, internal/script and internal/enginerig are for tests
// alone: no package's non-test code may depend on them.
var forbidden = map[string][]string{
	"parser":    {module, "github.com/panjf2000/gnet"},
	"transport": {module},
	"ratelimit": {module + "/shard", module + "/dialog", module + "/route", module + "/health", module + "/carrier", module + "/cmd"},
	"health":    {module + "/shard", module + "/dialog", module + "/route", module + "/carrier", module + "/cmd"},
	"route":     {module + "/shard", module + "/dialog", module + "/carrier", module + "/cmd"},
	"carrier":   {module + "/shard", module + "/dialog", module + "/cmd"},
	"dialog":    {module + "/shard", module + "/cmd", "github.com/panjf2000/gnet"},
	"shard":     {module + "/cmd"},
	// fleet is below the call core and the carrier plane, which use it:
	// it hands them callbacks, never imports them.
	"fleet": {module + "/shard", module + "/dialog", module + "/route", module + "/health", module + "/ratelimit",
		module + "/carrier", module + "/quality", module + "/cmd", "github.com/panjf2000/gnet"},
	// internal holds test helpers and internal/redisurl; the engine rig
	// must not import the call core it drives, whose own tests import the
	// rig.
	"internal": {module + "/dialog/b2bua", module + "/shard", module + "/cmd", "github.com/panjf2000/gnet"},
	// quality is a library the carrier plane feeds: it may read route's
	// types, nothing of the runtime (quality/redisstore, its Redis store,
	// likewise).
	"quality": {module + "/shard", module + "/dialog", module + "/cmd", module + "/carrier", module + "/health", module + "/ratelimit", "github.com/panjf2000/gnet"},
}

// TestDependencies fails when a package imports what it must not.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test=false", "-f",
		`{{.ImportPath}} {{join .Imports ","}} {{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const testtier = module + "/internal/testtier"
	testOnly := []string{testtier, module + "/internal/script", module + "/internal/enginerig"}
	seen, seenDigest := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		pkg, imports, deps := fields[0], strings.Split(fields[1], ","), fields[2:]
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			continue
		}
		top, _, _ := strings.Cut(rel, "/")
		if top == "parser" {
			seen++
		}
		digest := rel == "dialog/digest" || strings.HasPrefix(rel, "dialog/digest/")
		if digest {
			seenDigest++
		}
		// parser, transport and dialog/digest are leaves; the test helpers
		// redistest, testtier and script, which any package's tests may
		// import, import only the standard library (redistest testtier too).
		testHelper := rel == "ratelimit/redistest" || slices.Contains(testOnly, pkg)
		leafHelper := testHelper && rel != "internal/enginerig"
		if rel == "internal/redisurl" {
			for _, d := range deps {
				if strings.HasPrefix(d, module+"/") {
					t.Errorf("%s imports %s: a leaf under every user of Redis, it may import nothing of the module", pkg, d)
				}
			}
		}
		if top == "parser" || top == "transport" || digest || leafHelper {
			for _, d := range deps {
				if strings.Contains(strings.Split(d, "/")[0], ".") && !(leafHelper && d == testtier) {
					t.Errorf("%s imports %s: it may import only the standard library", pkg, d)
				}
			}
		}
		if !testHelper {
			for _, d := range deps {
				if slices.Contains(testOnly, d) {
					t.Errorf("%s imports %s, which only tests may", pkg, d)
				}
			}
		}
		if top != "shard" {
			for _, d := range imports {
				if strings.HasPrefix(d, "github.com/panjf2000/gnet") {
					t.Errorf("%s imports %s: only shard may import gnet", pkg, d)
				}
			}
		}
		for _, bad := range forbidden[top] {
			for _, d := range deps {
				if d == bad || strings.HasPrefix(d, bad+"/") {
					t.Errorf("%s imports %s, which it must not", pkg, d)
				}
			}
		}
	}
	if seen == 0 || seenDigest == 0 {
		t.Fatal("go list did not list the parser or the dialog/digest package")
	}
}
