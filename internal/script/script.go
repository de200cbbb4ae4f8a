// Package script runs state-machine tests written as scripts in testdata/,
// in the manner of pebble's datadriven tests: each case is a command line,
// optional input lines, "----", and the output the command must produce,
// up to a blank line. Blank lines and lines starting with "#" between cases
// are kept as they are: comments that cite the RFC a case checks.
//
//	# RFC 3261 17.1.1.2: Timer A doubles.
//	advance 1s
//	----
//	@500ms timer A t1
//	send t1 UDP 203.0.113.5:5060 INVITE sip:carol@example.net SIP/2.0
//
// A package's test runs its scripts with Run and a driver of its own, which
// reads each Command and returns what it produced. The flag -rewrite
// (go test -run TestScripts -rewrite) writes the outputs the driver gives
// back into the files instead of comparing them; review the diff by hand
// before committing it.
//
// Only tests import this package (deps_test.go checks it).
package script

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of the testdata scripts")

// Command is one case of a script.
type Command struct {
	Pos   string   // file:line of the command, for messages
	Line  string   // the command line as written
	Name  string   // its first field
	Args  []string // the fields after Name
	Input []string // the lines between the command line and "----"
}

// Run runs each script matching glob (testdata/*.txt) as a subtest named
// for its file without the extension, with a driver newDriver makes for
// that script: run returns a command's output, one line per line, "" for
// none. It fails when glob matches no file.
func Run(t *testing.T, glob string, newDriver func(t *testing.T) (run func(c *Command) string)) {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", glob, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		t.Run(name, func(t *testing.T) { RunFile(t, f, newDriver(t)) })
	}
}

// RunFile runs the script at path through run, reporting each output that
// differs from the expected one (or, with -rewrite, writing the outputs
// into the file).
func RunFile(t testing.TB, path string, run func(c *Command) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var rewritten strings.Builder
	for n := 0; n < len(lines); {
		line := lines[n]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			rewritten.WriteString(line + "\n")
			n++
			continue
		}
		c := &Command{Pos: path + ":" + strconv.Itoa(n+1), Line: line}
		fields := strings.Fields(line)
		c.Name, c.Args = fields[0], fields[1:]
		for n++; n < len(lines) && lines[n] != "----"; n++ {
			c.Input = append(c.Input, lines[n])
		}
		if n == len(lines) {
			t.Fatalf("%s: %q has no ----", c.Pos, line)
		}
		var want []string
		for n++; n < len(lines) && lines[n] != ""; n++ {
			want = append(want, lines[n])
		}
		got := strings.TrimRight(run(c), "\n")
		if strings.Contains(got, "\n\n") {
			t.Fatalf("%s: %s: the output has a blank line, which would end it:\n%s", c.Pos, line, got)
		}
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\n got:\n\t%s\nwant:\n\t%s", c.Pos, line,
				strings.ReplaceAll(got, "\n", "\n\t"), strings.Join(want, "\n\t"))
		}
		rewritten.WriteString(line + "\n")
		for _, in := range c.Input {
			rewritten.WriteString(in + "\n")
		}
		rewritten.WriteString("----\n")
		if got != "" {
			rewritten.WriteString(got + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
