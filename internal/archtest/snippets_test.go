package archtest

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var updateSnippets = flag.Bool("update-snippets", false, "rewrite the Markdown code blocks that differ from their source")

// snippetMarker precedes a fenced code block that is a copy of compiled
// source, so it cannot rot:
//
//	<!-- snippet: examples/customscorer/leastbusy.go -->            the whole file
//	<!-- snippet: examples/customscorer/leastbusy.go#LeastBusy -->  a declaration with its doc comment
//	<!-- snippet: examples/customscorer/leastbusy.go#LeastBusy.Score -->  a method
//	<!-- snippet: examples/customscorer/example_test.go#Example/body -->  a function's body
var snippetMarker = regexp.MustCompile(`^<!-- snippet: ([^ #]+)(?:#([A-Za-z0-9_.]+)(/body)?)? -->$`)

// TestDocSnippets checks every marked code block of README.md and docs/
// against its source. Fix a failure by copying the source into the block,
// or run
//
//	go test ./internal/archtest -run TestDocSnippets -update-snippets
func TestDocSnippets(t *testing.T) {
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	total := 0
	for _, f := range files {
		n, err := checkSnippets(root, f, *updateSnippets)
		total += n
		if err != nil {
			t.Error(err)
		}
	}
	if total == 0 {
		t.Error("no snippet markers found: the docs should quote compiled examples")
	}
}

// checkSnippets checks (or, with update, rewrites) the marked blocks of the
// Markdown file md and returns how many it found.
func checkSnippets(root, md string, update bool) (int, error) {
	data, err := os.ReadFile(md)
	if err != nil {
		return 0, err
	}
	rel, _ := filepath.Rel(root, md)
	lines := strings.Split(string(data), "\n")
	var problems []string
	found := 0
	for i := 0; i < len(lines); i++ {
		m := snippetMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		found++
		src, err := extractSnippet(filepath.Join(root, filepath.FromSlash(m[1])), m[2], m[3] != "")
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: %v", rel, i+1, err))
			continue
		}
		// The fenced block on the next line.
		open := i + 1
		if open >= len(lines) || !strings.HasPrefix(lines[open], "```") {
			problems = append(problems, fmt.Sprintf("%s:%d: the marker must be followed by a ``` block", rel, i+1))
			continue
		}
		end := open + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		if end == len(lines) {
			problems = append(problems, fmt.Sprintf("%s:%d: unterminated code block", rel, open+1))
			continue
		}
		block := strings.Join(lines[open+1:end], "\n")
		if block == src {
			i = end
			continue
		}
		if update {
			srcLines := strings.Split(src, "\n")
			lines = append(lines[:open+1], append(srcLines, lines[end:]...)...)
			i = open + len(srcLines) + 1
			continue
		}
		b, s := strings.Split(block, "\n"), strings.Split(src, "\n")
		k := 0
		for k < len(b) && k < len(s) && b[k] == s[k] {
			k++
		}
		at := func(l []string) string {
			if k < len(l) {
				return l[k]
			}
			return "(end of block)"
		}
		source := m[1]
		if m[2] != "" {
			source += "#" + m[2] + m[3]
		}
		problems = append(problems, fmt.Sprintf("%s:%d: the block differs from %s at its line %d:\n\tdoc:    %s\n\tsource: %s",
			rel, open+2+k, source, k+1, at(b), at(s)))
		i = end
	}
	if update {
		if err := os.WriteFile(md, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			return found, err
		}
	}
	if len(problems) > 0 {
		return found, fmt.Errorf("%s\nCopy the source into the block, or run: go test ./internal/archtest -run TestDocSnippets -update-snippets",
			strings.Join(problems, "\n"))
	}
	return found, nil
}

// extractSnippet returns the text of the file at path: all of it, the
// declaration called name (Type.Method for a method) with its doc comment,
// or that function's body less one level of indentation.
func extractSnippet(path, name string, body bool) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if name == "" {
		return strings.TrimRight(string(src), "\n"), nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	for _, decl := range f.Decls {
		var doc *ast.CommentGroup
		switch d := decl.(type) {
		case *ast.FuncDecl:
			n := d.Name.Name
			if d.Recv != nil {
				n = receiverType(d.Recv.List[0].Type) + "." + n
			}
			if n != name {
				continue
			}
			if body {
				text := string(src[off(d.Body.Lbrace)+1 : off(d.Body.Rbrace)])
				text = strings.Trim(text, "\n")
				var out []string
				for _, l := range strings.Split(text, "\n") {
					out = append(out, strings.TrimPrefix(l, "\t"))
				}
				return strings.Join(out, "\n"), nil
			}
			doc = d.Doc
		case *ast.GenDecl:
			match := false
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					match = match || s.Name.Name == name
				case *ast.ValueSpec:
					for _, n := range s.Names {
						match = match || n.Name == name
					}
				}
			}
			if !match || body {
				continue
			}
			doc = d.Doc
		}
		start := decl.Pos()
		if doc != nil {
			start = doc.Pos()
		}
		return string(bytes.TrimRight(src[off(start):off(decl.End())], "\n")), nil
	}
	return "", fmt.Errorf("%s: no declaration %s%s", path, name, map[bool]string{true: "/body"}[body])
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
)

// pendingDocs are pages other work in progress is writing: links to them are
// allowed while they do not exist yet (the test reports a listed page that
// exists).
var pendingDocs = []string{}

// TestDocLinks checks that every relative link of README.md and docs/ names
// a file that exists and, for a #fragment into Markdown, a heading there.
func TestDocLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, p := range pendingDocs {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
			t.Errorf("%s exists now: remove it from pendingDocs", p)
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		fenced := false
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				file := f
				if path != "" {
					file = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
					if _, err := os.Stat(file); err != nil {
						if r, _ := filepath.Rel(root, file); slices.Contains(pendingDocs, filepath.ToSlash(r)) {
							continue
						}
						t.Errorf("%s:%d: link %q: %v", rel, i+1, target, err)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				if !headingAnchors(t, file)[frag] {
					t.Errorf("%s:%d: link %q: no heading with that anchor in %s", rel, i+1, target, filepath.Base(file))
				}
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: lower case, spaces as dashes, punctuation other than dashes
// and underscores dropped, "-1", "-2"... for repeats.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
