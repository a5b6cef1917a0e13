package clock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden are the time functions that read or wait on the system clock;
// SPEC §6 allows them only inside internal/clock.
var forbidden = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "NewTimer": true, "NewTicker": true,
	"Tick": true, "AfterFunc": true, "Since": true, "Until": true,
}

// TestNoSystemClockOutsideClockPackage walks every non-test Go file of the
// module and fails on any reference to a forbidden time function (a call or a
// method value such as `now: time.Now`) outside internal/clock.
func TestNoSystemClockOutsideClockPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	var bad []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" || rel == filepath.Join("internal", "clock") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		bad = append(bad, forbiddenUses(t, fset, path, rel)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("reads the system clock outside internal/clock (SPEC §6): %s", b)
	}
}

func forbiddenUses(t *testing.T, fset *token.FileSet, path, rel string) []string {
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			name = "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" || name == "_" {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && forbidden[sel.Sel.Name] {
			pos := fset.Position(sel.Pos())
			out = append(out, rel+":"+strconv.Itoa(pos.Line)+": time."+sel.Sel.Name)
		}
		return true
	})
	return out
}
