package lcr

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: lcr is a library of the routing layer. It must not
// depend on the call core, the event loops, health checking or the
// configuration (cmd maps config onto Options).
func TestDependencies(t *testing.T) {
	const module = "github.com/sipedge/sipedge/"
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"dialog", "shard", "health", "cmd", "ratelimit", "parser"} {
			if dep == module+bad || strings.HasPrefix(dep, module+bad+"/") {
				t.Errorf("lcr depends on %s, which it must not", dep)
			}
		}
	}
}
