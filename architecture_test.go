package sipedge_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// ARCHITECTURE.md is a map of the code: these tests keep it from drifting.
// Every name it writes in a code span is checked against the tree:
//
//   - a path (it has a '/' or ends in a file extension): the file or
//     directory exists;
//   - a Go name, `pkg.Name` or `pkg.Type.Member`, where pkg is a package
//     name of the module (unique) or a directory (`cmd/sipedge.runCmd`):
//     Name is a function, type, variable or constant the package declares
//     in its non-test files, Member a method, struct field or interface
//     method of Type;
//
// and so is every relative link. A code span of another shape (a command,
// a metric, a configuration key written `lcr: api_url`) is prose.

// TestArchitectureNames fails when ARCHITECTURE.md names a file, a
// directory, a package, a function, a type or a member that does not exist.
func TestArchitectureNames(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := loadTree(".")
	if err != nil {
		t.Fatal(err)
	}
	checked, problems := tree.check(string(doc))
	for _, p := range problems {
		t.Errorf("ARCHITECTURE.md:%s", p)
	}
	// The map names hundreds of things: a handful checked means the
	// patterns stopped matching the doc's notation, not that all is well.
	if checked < 100 {
		t.Errorf("only %d names of ARCHITECTURE.md checked, want at least 100", checked)
	}
}

// TestArchitectureMapsEveryPackage fails when a package of the module is
// missing from ARCHITECTURE.md's code map, which names each as `dir/`.
func TestArchitectureMapsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := loadTree(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range tree.dirs() {
		if !strings.Contains(string(doc), "`"+dir+"/`") {
			t.Errorf("package %s is missing from ARCHITECTURE.md: add a line for `%s/` to its code map", dir, dir)
		}
	}
}

// TestArchitectureChecker proves the checker fails on what does not exist.
func TestArchitectureChecker(t *testing.T) {
	tree, err := loadTree(".")
	if err != nil {
		t.Fatal(err)
	}
	f := func(doc string, want int) {
		t.Helper()
		checked, problems := tree.check(doc)
		if len(problems) != want || checked == 0 {
			t.Errorf("%q: %d checked, problems %q, want %d problems", doc, checked, problems, want)
		}
	}
	f("`b2bua.Engine.Receive`", 0)                                                      // method
	f("`b2bua.Engine.Recieve`", 1)                                                      // misspelt
	f("`b2bua.Env.Carriers`", 0)                                                        // struct field
	f("`b2bua.Carriers.Reserve`", 0)                                                    // interface method
	f("`b2bua.Engine`, `dialog/b2bua.Engine.newCall`", 0)                               // type; directory-qualified
	f("`route.NoDeadline` and `route.DefaultRerouteCauses`", 0)                         // constant, variable
	f("`cmd/sipedge.runCmd`", 0)                                                        // a main package, by its directory
	f("`main.runCmd`", 1)                                                               // ambiguous package name
	f("`nopkg.Foo`", 1)                                                                 // no such package
	f("`testing.AllocsPerRun`, `metrics.Set`, `b2bua.Engine`", 0)                       // other modules' names
	f("`lcr.api_url`", 1)                                                               // a config key in Go's notation
	f("`dialog/b2bua/admit.go` and `dialog/b2bua/`", 0)                                 // file, directory
	f("`dialog/b2bua/admission.go`", 1)                                                 // no such file
	f("[lcr](docs/design/lcr.md#3-sequential-failover)", 0)                             // link with an anchor
	f("[gone](docs/design/gone.md)", 1)                                                 // dead link
	f("[web](https://www.rfc-editor.org/rfc/rfc3261) `b2bua.Engine`", 0)                // a web link is not ours to check
	f("`go test -short ./...`, `./...`, `/v1/calls`, `lcr: api_url` `b2bua.Engine`", 0) // prose
}

// tree is what the module declares: per directory, its package's name and
// the names its non-test files declare.
type tree struct {
	root  string
	pkgs  map[string]*pkgDecls // by directory, slash-separated, relative
	names map[string][]string  // package name -> directories
	// foreign holds the names of the other modules' packages the module
	// imports (testing, http, metrics): their names are not checked.
	foreign map[string]bool
}

type pkgDecls struct {
	name  string
	decls map[string]bool // "Name" and "Type.Member"
}

// loadTree reads the module at root, leaving out directories of other
// modules, testdata and hidden ones.
func loadTree(root string) (*tree, error) {
	tr := &tree{root: root, pkgs: map[string]*pkgDecls{}, names: map[string][]string{}, foreign: map[string]bool{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != root {
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		bp, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files
		}
		for _, imports := range [][]string{bp.Imports, bp.TestImports, bp.XTestImports} {
			for _, p := range imports {
				if !strings.HasPrefix(p, module+"/") {
					tr.foreign[importName(p)] = true
				}
			}
		}
		if len(bp.GoFiles) == 0 {
			return nil // tests only
		}
		pd := &pkgDecls{name: bp.Name, decls: map[string]bool{}}
		for _, file := range bp.GoFiles {
			if err := pd.read(filepath.Join(path, file)); err != nil {
				return err
			}
		}
		rel := filepath.ToSlash(path)
		tr.pkgs[rel] = pd
		tr.names[bp.Name] = append(tr.names[bp.Name], rel)
		return nil
	})
	return tr, err
}

// read adds what one file declares at its top level.
func (pd *pkgDecls) read(path string) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				pd.decls[d.Name.Name] = true
			} else {
				pd.decls[receiverName(d.Recv.List[0].Type)+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						pd.decls[n.Name] = true
					}
				case *ast.TypeSpec:
					pd.decls[s.Name.Name] = true
					pd.members(s.Name.Name, s.Type)
				}
			}
		}
	}
	return nil
}

// members adds the fields of a struct type and the methods of an
// interface type.
func (pd *pkgDecls) members(typ string, e ast.Expr) {
	var list *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return
	}
	for _, f := range list.List {
		if len(f.Names) == 0 { // embedded: named by its type
			pd.decls[typ+"."+receiverName(f.Type)] = true
		}
		for _, n := range f.Names {
			pd.decls[typ+"."+n.Name] = true
		}
	}
}

// importName is the name a package is imported under by default: the
// last element of its path that is not a major version.
func importName(path string) string {
	elems := strings.Split(path, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = elems[len(elems)-2]
	}
	return name
}

// receiverName is the type name in a receiver or an embedded field:
// T, *T, T[P], pkg.T.
func receiverName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// dirs returns the module's package directories, sorted.
func (tr *tree) dirs() []string {
	var out []string
	for d := range tr.pkgs {
		if d != "." {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// goName is pkg.Name or pkg.Type.Member, pkg a package name or a
	// directory.
	goName = regexp.MustCompile(`^((?:[a-z0-9_-]+/)*[a-z][a-z0-9_-]*)\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?$`)
	// pathName is a relative path: a '/' in it, or a file extension.
	pathName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]*)*$`)
	fileExt  = regexp.MustCompile(`\.(go|md|sh|yaml|yml|json|txt|mod|sum|lua|py|xml|cfg|conf)$`)
)

// check checks every name and link in doc; it returns how many it checked
// and a "line: problem" per name that does not exist.
func (tr *tree) check(doc string) (checked int, problems []string) {
	for i, line := range strings.Split(doc, "\n") {
		report := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%d: %s", i+1, fmt.Sprintf(format, args...)))
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(tr.root, target)); err != nil {
				report("link to %s, which does not exist", m[1])
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			span := m[1]
			switch {
			case fileExt.MatchString(span) && pathName.MatchString(span),
				strings.Contains(span, "/") && pathName.MatchString(span) && !goName.MatchString(span):
				checked++
				if _, err := os.Stat(filepath.Join(tr.root, span)); err != nil {
					report("`%s`: no such file or directory", span)
				}
			case goName.MatchString(span):
				m := goName.FindStringSubmatch(span)
				if tr.names[m[1]] == nil && tr.foreign[m[1]] {
					continue // another module's package
				}
				checked++
				if err := tr.resolve(m); err != nil {
					report("`%s`: %v", span, err)
				}
			}
		}
	}
	return checked, problems
}

// resolve checks a goName match: pkg, Name, and Member or "".
func (tr *tree) resolve(m []string) error {
	pkg, name, member := m[1], m[2], m[3]
	var dir string
	if strings.Contains(pkg, "/") {
		if _, ok := tr.pkgs[pkg]; !ok {
			return fmt.Errorf("no Go package in directory %s", pkg)
		}
		dir = pkg
	} else {
		switch dirs := tr.names[pkg]; len(dirs) {
		case 0:
			return fmt.Errorf("no package is called %s (write a configuration key as `section: key`)", pkg)
		case 1:
			dir = dirs[0]
		default:
			return fmt.Errorf("package name %s is in %s: name the directory, `%s.%s`", pkg, strings.Join(dirs, ", "), dirs[0], name)
		}
	}
	pd := tr.pkgs[dir]
	want := name
	if member != "" {
		want = name + "." + member
	}
	if !pd.decls[want] {
		return fmt.Errorf("package %s (%s/) declares no %s", pd.name, dir, want)
	}
	return nil
}
