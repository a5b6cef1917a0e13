package layout_test

import (
	"os/exec"
	"strings"
	"testing"
)

// rank orders the stack: a package may import only packages of a lower rank
// (or its own). Packages beside the stack have their own rules below.
var rank = map[string]int{
	"herald/internal": 0,
	"herald/outbox":   1,
	"herald/cron":     2,
	"herald/gateway":  3,
	"herald/cmd":      4,
}

func layer(pkg string) (string, bool) {
	for prefix := range rank {
		if pkg == prefix || strings.HasPrefix(pkg, prefix+"/") {
			return prefix, true
		}
	}
	return "", false
}

// TestImportsPointDown reads every package's non-test imports with `go list`
// and checks the rules of SPEC §3.
func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "herald/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, imports := f[0], f[1:]
		for _, imp := range imports {
			if !strings.HasPrefix(imp, "herald/") {
				continue
			}
			if why := violates(pkg, imp); why != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, why)
			}
		}
	}
}

func violates(pkg, imp string) string {
	beside := func(p string) bool {
		return strings.HasPrefix(p, "herald/fakeplatform") || strings.HasPrefix(p, "herald/tzoracle") || strings.HasPrefix(p, "herald/e2e")
	}
	switch {
	case strings.HasPrefix(pkg, "herald/tzoracle"):
		return "the oracle imports nothing of ours"
	case strings.HasPrefix(pkg, "herald/fakeplatform"):
		if imp != "herald/internal/clock" && !strings.HasPrefix(imp, "herald/fakeplatform") {
			return "the fake platform sits beside the stack (it may share only the clock)"
		}
	case strings.HasPrefix(pkg, "herald/e2e"):
		if !beside(imp) && imp != "herald/internal/clock" {
			return "the e2e suites are black-box: they import only the harness, the fake platform, the oracle and the clock"
		}
	case strings.HasPrefix(imp, "herald/tzoracle"):
		return "only tests import the oracle"
	case strings.HasPrefix(imp, "herald/e2e"):
		return "nothing in the stack imports the e2e tier"
	case pkg == "herald/cmd/fakeplatform":
		if !strings.HasPrefix(imp, "herald/fakeplatform") && imp != "herald/internal/clock" {
			return "the fake platform's binary wires only the fake"
		}
	default:
		from, ok1 := layer(pkg)
		to, ok2 := layer(imp)
		if ok1 && ok2 && rank[to] > rank[from] {
			return "imports point down: cmd → gateway → cron → outbox → internal"
		}
		if ok1 && strings.HasPrefix(imp, "herald/fakeplatform") {
			return "the stack does not import the fake platform"
		}
	}
	return ""
}
