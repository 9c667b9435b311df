package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocComments is the documentation linter of DESIGN.md ("Godoc is the
// documentation"): every library package has a doc.go with its package
// comment, every command a package comment, and every exported identifier a
// doc comment that starts with its name (an article may come first). It
// reads the root module's non-test files with go/parser; nested modules
// (their own go.mod) are theirs to check.
//
// What counts as exported: top-level types, functions, constants and
// variables, and methods of exported types. A comment on a const or var
// group covers its members; a type inside a type group needs its own.
func TestDocComments(t *testing.T) {
	root := filepath.Join("..", "..")
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel != "." {
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
		}
		p, err := lintDir(path, rel)
		problems = append(problems, p...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%d documentation problems (DESIGN.md: every package has a doc.go, every exported identifier a doc comment starting with its name):\n  %s",
			len(problems), strings.Join(problems, "\n  "))
	}
}

// lintDir checks the package in dir (rel is its path for messages).
func lintDir(dir, rel string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		names = append(names, n)
	}
	if len(files) == 0 {
		return nil, nil
	}
	var problems []string
	report := func(pos token.Pos, format string, args ...any) {
		p := fset.Position(pos)
		problems = append(problems, fmt.Sprintf("%s/%s:%d: %s", rel, filepath.Base(p.Filename), p.Line, fmt.Sprintf(format, args...)))
	}
	pkg := files[0].Name.Name
	if pkg == "main" {
		if !slices.ContainsFunc(files, func(f *ast.File) bool { return f.Doc != nil }) {
			problems = append(problems, fmt.Sprintf("%s: command has no package comment (\"Command NAME ...\")", rel))
		}
	} else {
		i := slices.Index(names, "doc.go")
		switch {
		case i < 0:
			problems = append(problems, fmt.Sprintf("%s: package %s has no doc.go", rel, pkg))
		case files[i].Doc == nil || !strings.HasPrefix(files[i].Doc.Text(), "Package "+pkg+" "):
			problems = append(problems, fmt.Sprintf("%s/doc.go: want a package comment starting \"Package %s \"", rel, pkg))
		}
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := receiverType(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					name = recv + "." + name
				}
				checkDoc(report, d.Pos(), name, d.Name.Name, d.Doc)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						doc := s.Doc
						if !d.Lparen.IsValid() {
							doc = d.Doc
						}
						checkDoc(report, s.Pos(), s.Name.Name, s.Name.Name, doc)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							switch {
							case s.Doc != nil:
								checkDoc(report, n.Pos(), n.Name, n.Name, s.Doc)
							case d.Lparen.IsValid() && (d.Doc != nil || s.Comment != nil):
								// a group comment or a line comment covers it
							case !d.Lparen.IsValid() && d.Doc != nil:
								checkDoc(report, n.Pos(), n.Name, n.Name, d.Doc)
							default:
								report(n.Pos(), "%s has no doc comment", n.Name)
							}
						}
					}
				}
			}
		}
	}
	return problems, nil
}

// checkDoc reports a missing doc comment, or one that does not start with
// the identifier's name (after an optional article).
func checkDoc(report func(token.Pos, string, ...any), pos token.Pos, qualified, name string, doc *ast.CommentGroup) {
	if doc == nil || strings.TrimSpace(doc.Text()) == "" {
		report(pos, "%s has no doc comment", qualified)
		return
	}
	text := doc.Text()
	for _, article := range []string{"A ", "An ", "The "} {
		text = strings.TrimPrefix(text, article)
	}
	if !strings.HasPrefix(text, name+" ") && !strings.HasPrefix(text, name+",") && !strings.HasPrefix(text, name+"'s ") &&
		!strings.HasPrefix(text, "Deprecated:") {
		first, _, _ := strings.Cut(doc.Text(), "\n")
		report(pos, "the doc comment of %s should start with %q, not %q", qualified, name, first)
	}
}

// receiverType returns the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
