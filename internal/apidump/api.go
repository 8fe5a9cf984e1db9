package main

import (
	"bytes"
	"go/ast"
	"go/printer"
	"go/token"
	"sort"
	"strconv"
	"strings"
)

// declarations returns the exported API of one package, given its parsed
// non-test files, as sorted lines of the forms
//
//	const Name Type = value
//	var Name Type
//	type Name[P constraint] underlying
//	type Name struct, Field Type `tag`
//	type Name interface, Method(params) results
//	func Name[P constraint](params) results
//	method (*Recv) Name(params) results
//
// Parameter names are left out, because renaming one is not an API change;
// type parameter names stay, because the signature refers to them. Lines
// are sorted so that moving a declaration between files changes nothing.
//
// The files are parsed, not type-checked, so fields and methods promoted
// from an unexported embedded type are not listed (no exported type here
// embeds one), and a constant shows its expression with iota's value put
// in (1 << 3), not the computed value.
func declarations(files []*ast.File) []string {
	var lines []string
	for _, f := range files {
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				lines = append(lines, genDecl(decl)...)
			case *ast.FuncDecl:
				if line, ok := funcDecl(decl); ok {
					lines = append(lines, line)
				}
			}
		}
	}
	sort.Strings(lines)
	return lines
}

func genDecl(d *ast.GenDecl) []string {
	var lines []string
	// In a const block a spec without values repeats the previous spec's
	// type and values with the next iota, so they are carried along.
	var typ ast.Expr
	var values []ast.Expr
	for iotaValue, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.ValueSpec:
			if d.Tok == token.VAR || len(s.Values) > 0 {
				typ, values = s.Type, s.Values
			}
			for i, name := range s.Names {
				if !name.IsExported() {
					continue
				}
				line := d.Tok.String() + " " + name.Name
				if typ != nil {
					line += " " + expr(typ)
				}
				// A var's initializer is shown only when it stands in for
				// the missing type; a const's value is part of its API.
				if (d.Tok == token.CONST || typ == nil) && len(values) == len(s.Names) {
					line += " = " + valueExpr(values[i], iotaValue)
				}
				lines = append(lines, line)
			}
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				lines = append(lines, typeSpec(s)...)
			}
		}
	}
	return lines
}

func typeSpec(s *ast.TypeSpec) []string {
	head := "type " + s.Name.Name + typeParams(s.TypeParams)
	if s.Assign.IsValid() {
		return []string{head + " = " + expr(s.Type)}
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		lines := []string{head + " struct"}
		for _, f := range t.Fields.List {
			for _, name := range fieldNames(f) {
				if !ast.IsExported(name) {
					continue
				}
				line := head + " struct, "
				if len(f.Names) == 0 {
					line += "embedded "
				} else {
					line += name + " "
				}
				line += expr(f.Type)
				if f.Tag != nil {
					line += " " + f.Tag.Value
				}
				lines = append(lines, line)
			}
		}
		return lines
	case *ast.InterfaceType:
		lines := []string{head + " interface"}
		unexported := false
		for _, f := range t.Methods.List {
			switch {
			case len(f.Names) == 0: // an embedded interface or a type set
				lines = append(lines, head+" interface, "+expr(f.Type))
			case f.Names[0].IsExported():
				lines = append(lines, head+" interface, "+f.Names[0].Name+signature(f.Type.(*ast.FuncType)))
			default:
				unexported = true
			}
		}
		// Unexported methods matter to callers: no other package can
		// implement the interface.
		if unexported {
			lines = append(lines, head+" interface, unexported methods")
		}
		return lines
	}
	return []string{head + " " + expr(s.Type)}
}

// fieldNames returns a field's names, or for an embedded field the name of
// its type (*pkg.T[P] embeds a field named T).
func fieldNames(f *ast.Field) []string {
	if len(f.Names) > 0 {
		names := make([]string, len(f.Names))
		for i, n := range f.Names {
			names[i] = n.Name
		}
		return names
	}
	return []string{baseName(f.Type)}
}

// baseName returns the name of the type that t refers to, without
// pointer, package qualifier or type arguments.
func baseName(t ast.Expr) string {
	for {
		switch e := t.(type) {
		case *ast.StarExpr:
			t = e.X
		case *ast.SelectorExpr:
			return e.Sel.Name
		case *ast.IndexExpr:
			t = e.X
		case *ast.IndexListExpr:
			t = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

func funcDecl(d *ast.FuncDecl) (string, bool) {
	if !d.Name.IsExported() {
		return "", false
	}
	if d.Recv == nil {
		return "func " + d.Name.Name + typeParams(d.Type.TypeParams) + signature(d.Type), true
	}
	recv := d.Recv.List[0].Type
	if !ast.IsExported(baseName(recv)) {
		return "", false
	}
	return "method (" + expr(recv) + ") " + d.Name.Name + signature(d.Type), true
}

func typeParams(list *ast.FieldList) string {
	if list == nil || len(list.List) == 0 {
		return ""
	}
	var params []string
	for _, f := range list.List {
		for _, name := range f.Names {
			params = append(params, name.Name+" "+expr(f.Type))
		}
	}
	return "[" + strings.Join(params, ", ") + "]"
}

// signature prints a function type's parameters and results without the
// func keyword, the type parameters or any names.
func signature(ft *ast.FuncType) string {
	params := "(" + strings.Join(types(ft.Params), ", ") + ")"
	results := types(ft.Results)
	switch {
	case len(results) == 0:
		return params
	case len(results) == 1:
		return params + " " + results[0]
	}
	return params + " (" + strings.Join(results, ", ") + ")"
}

// types lists the type of every parameter in list, once per name.
func types(list *ast.FieldList) []string {
	if list == nil {
		return nil
	}
	var out []string
	for _, f := range list.List {
		t := expr(f.Type)
		for range max(1, len(f.Names)) {
			out = append(out, t)
		}
	}
	return out
}

// valueExpr prints a value expression with iota replaced by its value in
// this spec.
func valueExpr(e ast.Expr, iotaValue int) string {
	var idents []*ast.Ident
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == "iota" {
			idents = append(idents, id)
		}
		return true
	})
	// The expression is shared by every spec that repeats it, so iota is
	// put back after printing.
	for _, id := range idents {
		id.Name = strconv.Itoa(iotaValue)
	}
	s := expr(e)
	for _, id := range idents {
		id.Name = "iota"
	}
	return s
}

// expr prints a type or value expression on one line, with the names of
// the parameters of any function type in it left out.
func expr(e ast.Expr) string {
	ast.Inspect(e, func(n ast.Node) bool {
		if ft, ok := n.(*ast.FuncType); ok {
			unname(ft.Params)
			unname(ft.Results)
		}
		return true
	})
	var buf bytes.Buffer
	// An empty file set has no line information, so the printer keeps
	// to one line what it can; what it cannot (a struct type's fields,
	// a function literal's body) is joined below. RawFormat leaves the
	// columns unaligned: a tab between a field's name and its type.
	cfg := printer.Config{Mode: printer.RawFormat}
	if err := cfg.Fprint(&buf, token.NewFileSet(), e); err != nil {
		return "<" + err.Error() + ">" // cannot happen for a parsed expression
	}
	lines := strings.Split(buf.String(), "\n")
	for i := range lines {
		lines[i] = strings.ReplaceAll(strings.TrimSpace(lines[i]), "\t", " ")
	}
	s := strings.Join(lines, "; ")
	return strings.NewReplacer("{; ", "{ ", "; }", " }").Replace(s)
}

// unname removes the names from a parameter list, keeping one entry per
// name so that func(a, b int) becomes func(int, int).
func unname(list *ast.FieldList) {
	if list == nil {
		return
	}
	var fields []*ast.Field
	for _, f := range list.List {
		for range max(1, len(f.Names)) {
			fields = append(fields, &ast.Field{Type: f.Type})
		}
	}
	list.List = fields
}
