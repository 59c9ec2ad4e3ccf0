package templatetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	module     = "github.com/taskledger/taskledger"
	sdkService = "github.com/aws/aws-sdk-go-v2/service/"
	ddbTypes   = sdkService + "dynamodb/types"
)

// facts is what one function's code does, found statically (see doc.go).
type facts struct {
	env     map[string][]string // variable name → where it is read
	dynamic map[string][]string // function → its env reads whose name is not a constant
	// needs are the permissions the code needs → where: "dynamodb:<Op> on
	// <Table>" or "... on <Table>/index/<Index>" (a table is named by its
	// logical id), and "<service>:<Op>" for every other service.
	needs map[string][]string
}

// node is a function (or a package's initialisation) in the call graph.
type node struct {
	edges []string // keys of the functions it names
	facts facts    // what its own body does
}

func newFacts() facts {
	return facts{env: map[string][]string{}, dynamic: map[string][]string{}, needs: map[string][]string{}}
}

func (f facts) merge(o facts) {
	for _, p := range []struct{ dst, src map[string][]string }{{f.env, o.env}, {f.dynamic, o.dynamic}, {f.needs, o.needs}} {
		for k, v := range p.src {
			p.dst[k] = append(p.dst[k], v...)
		}
	}
}

// analyse returns the facts of the main package pattern names
// (./functions/<name>). tables are the logical
// ids of the template's tables: the code names a table by a field or
// variable called after its logical id (ledger.Config.TasksTable, ...).
func analyse(root, pattern string, tables []string) (facts, error) {
	pkgs, err := goList(root, pattern)
	if err != nil {
		return facts{}, err
	}
	fset := token.NewFileSet()
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if f := exports[path]; f != "" {
			return os.Open(f)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})

	nodes := map[string]*node{}
	byName := map[string][]string{} // method name → keys of module methods
	var roots []string
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		a, err := check(fset, imp, p, tables)
		if err != nil {
			return facts{}, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
		}
		init := p.ImportPath + ".init"
		roots = append(roots, init)
		for _, f := range a.files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Name.Name == "init" && fd.Recv == nil {
					a.scan(nodeFor(nodes, init), d)
					continue
				}
				fn := a.info.Defs[fd.Name].(*types.Func)
				k := funcKey(fn)
				if fd.Recv != nil {
					byName[fn.Name()] = append(byName[fn.Name()], k)
				}
				a.scan(nodeFor(nodes, k), fd)
			}
		}
		if p.Name == "main" {
			roots = append(roots, p.ImportPath+".main")
		}
	}

	out := newFacts()
	seen := map[string]bool{}
	var visit func(k string)
	visit = func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		if m, ok := strings.CutPrefix(k, "iface."); ok {
			for _, impl := range byName[m] {
				visit(impl)
			}
			return
		}
		if n := nodes[k]; n != nil {
			out.merge(n.facts)
			for _, e := range n.edges {
				visit(e)
			}
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return out, nil
}

func nodeFor(nodes map[string]*node, k string) *node {
	if nodes[k] == nil {
		nodes[k] = &node{facts: newFacts()}
	}
	return nodes[k]
}

// funcKey names a function across packages: "path.Func", "path.Type.Method",
// or "iface.Method" for a method of an interface.
func funcKey(f *types.Func) string {
	f = f.Origin()
	if recv := f.Type().(*types.Signature).Recv(); recv != nil {
		if types.IsInterface(recv.Type()) {
			return "iface." + f.Name()
		}
		t := recv.Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			return n.Obj().Pkg().Path() + "." + n.Obj().Name() + "." + f.Name()
		}
	}
	if f.Pkg() == nil {
		return f.Name()
	}
	return f.Pkg().Path() + "." + f.Name()
}

// listed is the part of `go list -json` we use.
type listed struct {
	ImportPath, Name, Dir, Export string
	GoFiles                       []string
	Module                        *struct{ Path string }
}

func goList(root, pattern string) ([]listed, error) {
	cmd := exec.Command(goTool(), "list", "-deps", "-export", "-tags", "lambda.norpc",
		"-json=ImportPath,Name,Dir,Export,GoFiles,Module", pattern)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v\n%s", pattern, err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// goTool is the go command on PATH (the one `make test` runs with).
func goTool() string {
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// pkgAnalysis is one type-checked module package.
type pkgAnalysis struct {
	fset    *token.FileSet
	files   []*ast.File
	info    *types.Info
	tables  map[string]bool           // the template's table logical ids
	rangeOf map[types.Object]ast.Expr // range variable → the ranged expression
	initOf  map[types.Object]ast.Expr // variable → its initialiser (package level, or := / = in a function)
}

func check(fset *token.FileSet, imp types.Importer, p listed, tables []string) (*pkgAnalysis, error) {
	a := &pkgAnalysis{fset: fset, tables: map[string]bool{}, rangeOf: map[types.Object]ast.Expr{}, initOf: map[types.Object]ast.Expr{}}
	for _, t := range tables {
		a.tables[t] = true
	}
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		a.files = append(a.files, f)
	}
	a.info = &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(p.ImportPath, fset, a.files, a.info); err != nil {
		return nil, err
	}
	def := func(id ast.Expr, v ast.Expr) {
		if id, ok := id.(*ast.Ident); ok && a.info.Defs[id] != nil {
			a.initOf[a.info.Defs[id]] = v
		}
	}
	for _, f := range a.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.RangeStmt:
				for _, v := range []ast.Expr{n.Key, n.Value} {
					if id, ok := v.(*ast.Ident); ok && a.info.Defs[id] != nil {
						a.rangeOf[a.info.Defs[id]] = n.X
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if len(n.Values) == len(n.Names) {
						def(id, n.Values[i])
					}
				}
			case *ast.AssignStmt:
				if n.Tok == token.DEFINE && len(n.Lhs) == len(n.Rhs) {
					for i := range n.Lhs {
						def(n.Lhs[i], n.Rhs[i])
					}
				}
			}
			return true
		})
	}
	return a, nil
}

// scan records the edges and facts of one declaration into n.
func (a *pkgAnalysis) scan(n *node, decl ast.Node) {
	where := a.where(decl)
	need := func(perm, at string) { n.facts.needs[perm] = append(n.facts.needs[perm], at) }
	var stack []ast.Node
	ast.Inspect(decl, func(x ast.Node) bool {
		if x == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, x)
		switch x := x.(type) {
		case *ast.Ident:
			if f, ok := a.info.Uses[x].(*types.Func); ok {
				n.edges = append(n.edges, funcKey(f))
			}
		case *ast.CallExpr:
			if perm, ok := a.sdkCall(x); ok && perm != "" {
				need(perm, where)
			}
			if a.isEnvRead(x) && len(x.Args) == 1 {
				names, ok := a.envNames(x.Args[0], stack)
				if !ok {
					n.facts.dynamic[where] = append(n.facts.dynamic[where], a.text(x))
				}
				for _, v := range names {
					n.facts.env[v] = append(n.facts.env[v], where)
				}
			}
		case *ast.CompositeLit:
			if perm, ok := a.txItem(x); ok {
				need(perm, where+" (transaction item)")
			}
		}
		return true
	})
}

// where names a declaration for messages: "pkg.Func (file.go:12)".
func (a *pkgAnalysis) where(decl ast.Node) string {
	pos := a.fset.Position(decl.Pos())
	name := "package init"
	if fd, ok := decl.(*ast.FuncDecl); ok {
		name = fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = a.text(fd.Recv.List[0].Type) + "." + name
		}
	}
	return fmt.Sprintf("%s (%s:%d)", name, filepath.Base(pos.Filename), pos.Line)
}

func (a *pkgAnalysis) text(e ast.Node) string {
	pos, end := a.fset.Position(e.Pos()), a.fset.Position(e.End())
	b, err := os.ReadFile(pos.Filename)
	if err != nil || end.Offset > len(b) {
		return "?"
	}
	return string(b[pos.Offset:end.Offset])
}

// calleeObj is the object a call's function expression names, if any.
func (a *pkgAnalysis) calleeObj(call *ast.CallExpr) types.Object {
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		return a.info.Uses[fn]
	case *ast.SelectorExpr:
		return a.info.Uses[fn.Sel]
	case *ast.IndexExpr: // generic instantiation
		if id, ok := fn.X.(*ast.Ident); ok {
			return a.info.Uses[id]
		}
	}
	return nil
}

// sdkCall maps a call of an AWS SDK operation to the permission it needs
// ("" for TransactWriteItems/TransactGetItems: their items carry it).
func (a *pkgAnalysis) sdkCall(call *ast.CallExpr) (string, bool) {
	sig, ok := a.info.Types[call.Fun].Type.(*types.Signature)
	obj := a.calleeObj(call)
	if !ok || obj == nil || sig.Params().Len() < 2 || len(call.Args) < 2 {
		return "", false
	}
	ptr, ok := sig.Params().At(1).Type().(*types.Pointer)
	if !ok {
		return "", false
	}
	in, ok := ptr.Elem().(*types.Named)
	if !ok || in.Obj().Pkg() == nil || !strings.HasPrefix(in.Obj().Pkg().Path(), sdkService) {
		return "", false
	}
	op, ok := strings.CutSuffix(in.Obj().Name(), "Input")
	if !ok || (obj.Name() != op && obj.Name() != "New"+op+"Paginator") {
		return "", false
	}
	switch svc := path.Base(in.Obj().Pkg().Path()); {
	case svc == "dynamodb" && (op == "TransactWriteItems" || op == "TransactGetItems"):
		return "", true
	case svc == "dynamodb":
		return "dynamodb:" + op + " on " + a.tableOf(call.Args[1]), true
	case svc == "bedrockruntime" && (op == "Converse" || op == "InvokeModel"):
		return "bedrock:InvokeModel", true
	case svc == "bedrockruntime" && (op == "ConverseStream" || op == "InvokeModelWithResponseStream"):
		return "bedrock:InvokeModelWithResponseStream", true
	case svc == "sqs", svc == "secretsmanager":
		return svc + ":" + op, true
	case svc == "s3" && (op == "GetObject" || op == "HeadObject"):
		return "s3:GetObject", true // HEAD is authorised as GetObject
	case svc == "s3" && op == "PutObject":
		return "s3:PutObject", true
	case svc == "s3" && op == "CopyObject":
		// PutObject on the destination; the GetObject it also needs on
		// the source is required by the verified reads around it.
		return "s3:PutObject", true
	case svc == "eventbridge":
		return "events:" + op, true
	case svc == "lambda" && op == "Invoke":
		return "lambda:InvokeFunction", true
	case svc == "sesv2" && op == "SendEmail":
		return "ses:SendEmail", true
	case svc == "sns" && op == "Publish":
		return "sns:Publish", true
	default:
		return "unmapped:" + svc + "." + op, true // fails the comparison loudly
	}
}

// txItemAction is the IAM action each transaction item type needs.
var txItemAction = map[string]string{
	"Put": "dynamodb:PutItem", "Update": "dynamodb:UpdateItem", "Delete": "dynamodb:DeleteItem",
	"ConditionCheck": "dynamodb:ConditionCheckItem", "Get": "dynamodb:GetItem",
}

// txItem maps a transaction item literal (dynamodb/types.Put, ...) to the
// permission it needs.
func (a *pkgAnalysis) txItem(lit *ast.CompositeLit) (string, bool) {
	t := a.info.Types[lit].Type
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil || named.Obj().Pkg().Path() != ddbTypes {
		return "", false
	}
	act, ok := txItemAction[named.Obj().Name()]
	if !ok {
		return "", false
	}
	return act + " on " + a.tableOf(lit), true
}

// tableOf resolves the table (and index) an input addresses: the TableName
// and IndexName of its literal, following local variables to their
// initialisers. "?" marks what cannot be resolved.
func (a *pkgAnalysis) tableOf(input ast.Expr) string {
	table, index := "?", ""
	if lit := a.literalOf(input, 3); lit != nil {
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch k, _ := kv.Key.(*ast.Ident); {
			case k == nil:
			case k.Name == "TableName":
				input = kv.Value
			case k.Name == "IndexName":
				index = "?"
				v := kv.Value
				if c, ok := v.(*ast.CallExpr); ok && len(c.Args) == 1 { // aws.String(x)
					v = c.Args[0]
				}
				if s, ok := a.stringConst(v); ok {
					index = s
				}
			}
		}
	}
	if names := a.tableNames(input, 3); len(names) == 1 {
		table = names[0]
	} else if len(names) > 1 {
		table = "?" + strings.Join(names, "|")
	}
	if index != "" {
		return table + "/index/" + index
	}
	return table
}

// literalOf finds the composite literal behind e (through &, parentheses
// and local variables).
func (a *pkgAnalysis) literalOf(e ast.Expr, depth int) *ast.CompositeLit {
	switch e := ast.Unparen(e).(type) {
	case *ast.CompositeLit:
		return e
	case *ast.UnaryExpr:
		return a.literalOf(e.X, depth)
	case *ast.Ident:
		if init, ok := a.initOf[a.info.Uses[e]]; ok && depth > 0 {
			return a.literalOf(init, depth-1)
		}
	}
	return nil
}

// tableNames collects the identifiers in e that are named after a table,
// following local variables to their initialisers.
func (a *pkgAnalysis) tableNames(e ast.Expr, depth int) []string {
	seen := map[string]bool{}
	var out []string
	ast.Inspect(e, func(x ast.Node) bool {
		id, ok := x.(*ast.Ident)
		if !ok {
			return true
		}
		var found []string
		if a.tables[id.Name] {
			found = []string{id.Name}
		} else if init, ok := a.initOf[a.info.Uses[id]]; ok && depth > 0 {
			found = a.tableNames(init, depth-1)
		}
		for _, f := range found {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
		return true
	})
	return out
}

// isEnvRead reports whether call reads an environment variable: os.Getenv,
// os.LookupEnv, or a function-typed variable shaped like them.
func (a *pkgAnalysis) isEnvRead(call *ast.CallExpr) bool {
	switch o := a.calleeObj(call).(type) {
	case *types.Func:
		return o.Pkg() != nil && o.Pkg().Path() == "os" && (o.Name() == "Getenv" || o.Name() == "LookupEnv")
	case *types.Var:
		sig, ok := o.Type().Underlying().(*types.Signature)
		if !ok || sig.Params().Len() != 1 || !isString(sig.Params().At(0).Type()) {
			return false
		}
		r := sig.Results()
		return (r.Len() == 1 || r.Len() == 2 && types.Identical(r.At(1).Type(), types.Typ[types.Bool])) && isString(r.At(0).Type())
	}
	return false
}

func isString(t types.Type) bool { return types.Identical(t, types.Typ[types.String]) }

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// envNames resolves the name argument of an env read. ok is false when the
// name is not known statically; a parameter of the enclosing function
// literal yields no names and ok (the literal's callers are the reads).
func (a *pkgAnalysis) envNames(arg ast.Expr, stack []ast.Node) (names []string, ok bool) {
	if s, ok := a.stringConst(arg); ok {
		if envName.MatchString(s) {
			return []string{s}, true
		}
		return nil, true // not an environment variable name: a func value used for something else
	}
	id, isIdent := ast.Unparen(arg).(*ast.Ident)
	if !isIdent {
		return nil, false
	}
	obj := a.info.Uses[id]
	if x, ok := a.rangeOf[obj]; ok {
		return a.constList(x)
	}
	for i := len(stack) - 1; i >= 0; i-- {
		switch fn := stack[i].(type) {
		case *ast.FuncLit:
			if a.isParam(fn.Type, obj) {
				return nil, true
			}
		case *ast.FuncDecl:
			return nil, false // a named function's parameter: its callers are not followed
		}
	}
	return nil, false
}

func (a *pkgAnalysis) isParam(ft *ast.FuncType, obj types.Object) bool {
	for _, f := range ft.Params.List {
		for _, n := range f.Names {
			if a.info.Defs[n] == obj {
				return true
			}
		}
	}
	return false
}

// constList resolves a literal list of string constants, directly or through
// a package-level variable.
func (a *pkgAnalysis) constList(x ast.Expr) ([]string, bool) {
	if id, ok := ast.Unparen(x).(*ast.Ident); ok {
		init, ok := a.initOf[a.info.Uses[id]]
		if !ok {
			return nil, false
		}
		x = init
	}
	lit, ok := ast.Unparen(x).(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	var out []string
	for _, e := range lit.Elts {
		s, ok := a.stringConst(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func (a *pkgAnalysis) stringConst(e ast.Expr) (string, bool) {
	tv, ok := a.info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}
