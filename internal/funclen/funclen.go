// Package funclen measures the functions of a Go source tree, so that a
// test can hold the tree to bee's rule: no function over 60 lines outside
// tests, or a reason written down for each one that stays.
//
// It reads files as text (go/parser); it never builds or runs them. Test
// files (_test.go), testdata folders and folders whose names begin with
// "." or "_" (which the go command ignores too) are not measured.
package funclen

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// A Func is one function or method declaration with a body.
type Func struct {
	// Name is the function's name, or Recv.Name for a method, Recv being
	// the receiver's type name without its pointer or type parameters.
	Name string
	// File is the file's path relative to the root given to Over, with
	// forward slashes.
	File string
	// Line is the line of the func keyword; Lines counts from it to the
	// closing brace, both included (the doc comment is not counted).
	Line, Lines int
}

// Key is the Func's name as an allow list writes it: "file.go:Name".
func (f Func) Key() string { return f.File + ":" + f.Name }

func (f Func) String() string {
	return fmt.Sprintf("%s:%d %s (%d lines)", f.File, f.Line, f.Name, f.Lines)
}

// Over returns every function declared under root, outside tests, that is
// longer than limit lines, longest first. It fails on a file that does not
// parse.
func Over(root string, limit int) ([]Func, error) {
	var long []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("measure functions: %w", err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fmt.Errorf("measure functions: %w", err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Type.Func).Line, fset.Position(fd.End()).Line
			if n := end - start + 1; n > limit {
				long = append(long, Func{Name: name(fd), File: filepath.ToSlash(rel), Line: start, Lines: n})
			}
		}
		return nil
	})
	slices.SortFunc(long, func(a, b Func) int {
		return cmp.Or(b.Lines-a.Lines, cmp.Compare(a.File, b.File), a.Line-b.Line)
	})
	return long, err
}

// name is fd's name, with its receiver's type name for a method.
func name(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
