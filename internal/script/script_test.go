package script

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps the failures RunFile reports; its
// Fatalf ends the goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.errs = append(r.errs, "fatal: "+fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// runRecorded runs the script text through run, with -rewrite set as
// given, and returns the failures and the file afterwards.
func runRecorded(t *testing.T, text string, rewriteOn bool, run func(c *Command) string) (errs []string, after string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func(was bool) { *rewrite = was }(*rewrite)
	*rewrite = rewriteOn
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunFile(r, path, run)
	}()
	<-done
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return r.errs, string(b)
}

// echo is a driver that prints its command back, with its input.
func echo(c *Command) string {
	if c.Name == "quiet" {
		return ""
	}
	out := fmt.Sprintf("%s %q", c.Name, c.Args)
	for _, in := range c.Input {
		out += "\nin " + in
	}
	return out
}

const echoed = `# A comment, kept.
say a b
----
say ["a" "b"]

quiet
----

# Input lines come before ----.
say
x: 1
  y: 2
----
say []
in x: 1
in   y: 2
`

func TestPassingScript(t *testing.T) {
	var seen []string
	errs, after := runRecorded(t, echoed, false, func(c *Command) string {
		seen = append(seen, c.Pos[strings.LastIndexByte(c.Pos, ':'):]+" "+c.Line)
		return echo(c)
	})
	if len(errs) != 0 {
		t.Fatalf("failures: %q", errs)
	}
	if want := []string{":2 say a b", ":6 quiet", ":10 say"}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("commands %q, want %q", seen, want)
	}
	if after != echoed {
		t.Fatalf("the file changed without -rewrite:\n%s", after)
	}
	// Rewritten with the same outputs, the file stays as it was.
	if errs, after := runRecorded(t, echoed, true, echo); len(errs) != 0 || after != echoed {
		t.Fatalf("rewrite changed a passing script (failures %q):\n%s", errs, after)
	}
}

func TestMismatchReported(t *testing.T) {
	text := strings.Replace(echoed, `say ["a" "b"]`, `say ["a" "c"]`, 1)
	errs, _ := runRecorded(t, text, false, echo)
	if len(errs) != 1 || !strings.Contains(errs[0], "s.txt:2: say a b") ||
		!strings.Contains(errs[0], `got:`+"\n\t"+`say ["a" "b"]`) || !strings.Contains(errs[0], `want:`+"\n\t"+`say ["a" "c"]`) {
		t.Fatalf("failures %q", errs)
	}
	// Expected output where the command gives none fails too.
	errs, _ = runRecorded(t, strings.Replace(echoed, "quiet\n----\n", "quiet\n----\nsomething\n", 1), false, echo)
	if len(errs) != 1 || !strings.Contains(errs[0], "s.txt:6: quiet") {
		t.Fatalf("failures %q", errs)
	}
}

func TestRewrite(t *testing.T) {
	text := "# c\nsay a\n----\nstale\nlines\n\nquiet\n----\nstale\n"
	errs, after := runRecorded(t, text, true, echo)
	if len(errs) != 0 {
		t.Fatalf("failures %q", errs)
	}
	if want := "# c\nsay a\n----\nsay [\"a\"]\n\nquiet\n----\n"; after != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", after, want)
	}
}

func TestMalformed(t *testing.T) {
	f := func(text, want string) {
		t.Helper()
		errs, _ := runRecorded(t, text, false, echo)
		if len(errs) != 1 || !strings.Contains(errs[0], want) {
			t.Fatalf("failures %q, want one with %q", errs, want)
		}
	}
	f("say a\nb\n", `s.txt:1: "say a" has no ----`)
	f("say a\n----\nsay [\"a\"]\n\nsay b\n", `s.txt:5: "say b" has no ----`)
	errs, _ := runRecorded(t, "say a\n----\n", false, func(*Command) string { return "one\n\ntwo" })
	if len(errs) != 1 || !strings.Contains(errs[0], "blank line") {
		t.Fatalf("failures %q", errs)
	}
}
