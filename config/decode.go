package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Load reads and parses the configuration file at path. A missing file is
// an error wrapping fs.ErrNotExist; callers that treat it as "use the
// defaults" check for that.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err // *fs.PathError: names the path, wraps fs.ErrNotExist
	}
	return Parse(data, path)
}

// Parse decodes a loopr.yml over Default() and validates the result.
// filename is recorded in Config.File and, as its base name, in errors.
// An empty document yields the defaults. Every error is an *Error.
func Parse(data []byte, filename string) (*Config, error) {
	c := Default()
	c.File = filename
	d := &decoder{file: baseName(filename), pos: map[string]int{}}
	root, err := d.document(data)
	if err != nil {
		return nil, err
	}
	if root != nil {
		if err := d.value(root, "", 0, reflect.ValueOf(c).Elem()); err != nil {
			return nil, err
		}
	}
	c.normalize()
	if err := c.validate(d.pos); err != nil {
		return nil, err
	}
	return c, nil
}

// normalize makes empty maps nil: `types: {}` is the default, not a difference.
func (c *Config) normalize() {
	if len(c.UserTypes) == 0 {
		c.UserTypes = nil
	}
	if len(c.Quotas) == 0 {
		c.Quotas = nil
	}
	if len(c.Agents) == 0 {
		c.Agents = nil
	}
	if len(c.Hooks) == 0 {
		c.Hooks = nil
	}
	for t, s := range c.Loops {
		if s.Hooks != nil && len(s.Hooks) == 0 {
			s.Hooks = nil
			c.Loops[t] = s
		}
	}
	for t, u := range c.UserTypes {
		if u.Hooks != nil && len(u.Hooks) == 0 {
			u.Hooks = nil
			c.UserTypes[t] = u
		}
	}
}

// Overlay decodes n, a mapping inside a larger YAML document in file
// filename (such as the `config:` of a `loopr sim` workload), over a copy
// of base, and validates the result; base is not changed. Keys in errors
// carry prefix ("config" → "work.yaml:3: config.concurrency.max_loops:
// must be > 0"); "" names them as in loopr.yml. A nil or null n gives a copy
// of base. Every error is an *Error.
func Overlay(base *Config, n *yaml.Node, filename, prefix string) (*Config, error) {
	c := base.clone()
	d := &decoder{file: baseName(filename), pos: map[string]int{}, prefix: prefix}
	if n != nil {
		if err := d.value(n, "", 0, reflect.ValueOf(c).Elem()); err != nil {
			return nil, err
		}
	}
	c.normalize()
	v := &checker{file: d.file, pos: d.pos, prefix: prefix}
	if err := c.check(v); err != nil {
		return nil, err
	}
	return c, nil
}

// clone copies c deeply enough for a decoder to write into the copy: the
// decoder replaces slices and map entries, it never changes them in place.
func (c *Config) clone() *Config {
	out := *c
	out.Loops = maps.Clone(c.Loops)
	out.UserTypes = maps.Clone(c.UserTypes)
	out.Quotas = maps.Clone(c.Quotas)
	out.Agents = maps.Clone(c.Agents)
	out.Hooks = maps.Clone(c.Hooks)
	return &out
}

// decoder walks a YAML node tree into a Config. pos records the line of
// every key it met, by dotted key, so Validate's errors can name lines too.
type decoder struct {
	file   string
	pos    map[string]int
	nodes  int    // values decoded so far, to bound alias expansion
	prefix string // prepended to keys in errors (Overlay)
}

// maxNodes bounds the values one file may decode to. A real loopr.yml has a
// few hundred; aliases could otherwise make a small file decode to billions.
const maxNodes = 100_000

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses data and returns the root node of its single document, or
// nil when there is none.
func (d *decoder) document(data []byte) (root *yaml.Node, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, d.syntaxError(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, d.syntaxError(err)
	default:
		return nil, &Error{File: d.file, Line: next.Line, Msg: "must hold a single YAML document"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

func (d *decoder) syntaxError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	return &Error{File: d.file, Line: line, Msg: "invalid YAML: " + msg}
}

func (d *decoder) errorf(line int, key, format string, args ...any) *Error {
	return &Error{File: d.file, Line: line, Key: prefixKey(d.prefix, key), Msg: fmt.Sprintf(format, args...)}
}

// prefixKey puts prefix before a dotted key.
func prefixKey(prefix, key string) string {
	switch {
	case prefix == "":
		return key
	case key == "":
		return prefix
	}
	return prefix + "." + key
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// value decodes n, the value of key, into v. keyLine is the line of the key,
// used when the value has no line of its own (an empty value).
func (d *decoder) value(n *yaml.Node, key string, keyLine int, v reflect.Value) error {
	line := n.Line // an alias's own line: where the value is used
	n = resolve(n)
	if line == 0 || isNull(n) {
		line = keyLine
	}
	if line == 0 {
		line = n.Line
	}
	if d.nodes++; d.nodes > maxNodes {
		return d.errorf(line, key, "too many values (more than %d, counting aliases each time they are used)", maxNodes)
	}
	if isNull(n) && (v.Kind() == reflect.Struct || v.Kind() == reflect.Map) {
		return nil // an empty section keeps its defaults
	}
	wrong := func() error {
		return d.errorf(line, key, "must be %s, got %s", want(v.Type()), Describe(n))
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return wrong()
		}
		fields := fieldsOf(v.Type())
		return d.pairs(n, key, func(name, sub string, k, val *yaml.Node) error {
			i, ok := fields[name]
			if !ok {
				return d.errorf(k.Line, sub, "%s", unknownKey(name, v.Type(), key == ""))
			}
			return d.value(val, sub, k.Line, v.FieldByIndex(i))
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return wrong()
		}
		// A new map: the old one may be shared (a default, Overlay's base).
		fresh := reflect.MakeMap(v.Type())
		for it := v.MapRange(); it.Next(); {
			fresh.SetMapIndex(it.Key(), it.Value())
		}
		v.Set(fresh)
		et := v.Type().Elem()
		return d.pairs(n, key, func(name, sub string, k, val *yaml.Node) error {
			e := reflect.New(et).Elem()
			if old := v.MapIndex(reflect.ValueOf(name)); old.IsValid() {
				e.Set(old)
			} else if et == reflect.TypeFor[TypeSettings]() {
				e.Set(reflect.ValueOf(DefaultTypeSettings()))
			} else if et == reflect.TypeFor[Agent]() {
				e.Set(reflect.ValueOf(DefaultAgent()))
			} else if et == reflect.TypeFor[Hook]() {
				e.Set(reflect.ValueOf(DefaultHook()))
			}
			if err := d.value(val, sub, k.Line, e); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(name), e)
			return nil
		})
	case reflect.Slice: // []string, or a list of mappings ([]Webhook)
		if n.Kind != yaml.SequenceNode {
			return wrong()
		}
		if v.Type().Elem().Kind() == reflect.Struct {
			return d.structList(n, key, line, v)
		}
		var list []string // an empty list decodes to nil, like the defaults
		for i, el := range n.Content {
			el = resolve(el)
			if d.nodes++; d.nodes > maxNodes {
				return d.errorf(line, key, "too many values (more than %d, counting aliases each time they are used)", maxNodes)
			}
			sub := fmt.Sprintf("%s[%d]", key, i)
			if el.Line > 0 {
				d.pos[sub] = el.Line
			}
			if el.Kind != yaml.ScalarNode || isNull(el) {
				return d.errorf(orLine(el.Line, line), sub, "must be a string, got %s", Describe(el))
			}
			list = append(list, el.Value)
		}
		v.Set(reflect.ValueOf(list))
	case reflect.Int:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			return wrong()
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&f) != nil {
			return wrong()
		}
		v.SetFloat(f)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			return wrong()
		}
		v.SetBool(b)
	case reflect.String:
		// Any scalar is text: `validate: [make, 2]` means what it says.
		if n.Kind == yaml.SequenceNode && strings.HasSuffix(key, ".agent") {
			return d.errorf(line, key, "must name an agent profile (default, or one of agents:), got a list: put the argv in agents.<name>.command and name that profile here")
		}
		if n.Kind != yaml.ScalarNode || isNull(n) {
			return wrong()
		}
		v.SetString(n.Value)
	default:
		panic(fmt.Sprintf("config: no decoder for %s at %s", v.Type(), key)) // a new field of an unsupported type
	}
	return nil
}

// structList decodes the sequence n, the value of key, into v, a slice of
// structs: each element is a mapping decoded like a section, named
// key[i] in errors. An empty list decodes to nil, like the defaults.
func (d *decoder) structList(n *yaml.Node, key string, line int, v reflect.Value) error {
	list := reflect.Zero(v.Type())
	for i, el := range n.Content {
		sub := fmt.Sprintf("%s[%d]", key, i)
		elLine := orLine(resolve(el).Line, line)
		d.pos[sub] = elLine
		if r := resolve(el); r.Kind != yaml.MappingNode {
			return d.errorf(elLine, sub, "must be a mapping, got %s", Describe(r))
		}
		e := reflect.New(v.Type().Elem()).Elem()
		if err := d.value(el, sub, elLine, e); err != nil {
			return err
		}
		list = reflect.Append(list, e)
	}
	v.Set(list)
	return nil
}

// orLine returns a if it is a line, else b.
func orLine(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

// pairs calls fn for each key/value of the mapping n, after checking that the
// key is a string and not a duplicate, and recording its line.
func (d *decoder) pairs(n *yaml.Node, key string, fn func(name, sub string, k, v *yaml.Node) error) error {
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.errorf(k.Line, key, "keys must be strings, got %s", Describe(k))
		}
		if k.ShortTag() == "!!merge" {
			return d.errorf(k.Line, joinKey(key, k.Value), "merge keys are not supported")
		}
		name, sub := k.Value, joinKey(key, k.Value)
		if first, dup := seen[name]; dup {
			return d.errorf(k.Line, sub, "duplicate key (first at line %d)", first)
		}
		seen[name] = k.Line
		d.pos[sub] = k.Line
		if err := fn(name, sub, k, v); err != nil {
			return err
		}
	}
	return nil
}

// fieldsOf maps the yaml key names of struct type t to field index paths,
// following fields marked `yaml:",inline"` into their own keys.
func fieldsOf(t reflect.Type) map[string][]int {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string][]int)
	}
	f := make(map[string][]int, t.NumField())
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		switch {
		case name == "" && opts == "inline":
			for sub, path := range fieldsOf(t.Field(i).Type) {
				f[sub] = append([]int{i}, path...)
			}
		case name != "" && name != "-":
			f[name] = []int{i}
		}
	}
	fieldCache.Store(t, f)
	return f
}

var fieldCache sync.Map // reflect.Type → map[string][]int

// want names what a Go type accepts, for "must be …" messages.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "a list of mappings"
		}
		return "a list of strings"
	}
	return "a mapping"
}

// Describe names what a YAML node holds, for the "got …" of an error
// message: "a mapping", "a list", "null", "an alias" or the quoted scalar
// (cut at 40 characters). Other strict decoders of loopr's YAML files use it
// so every file's errors read alike.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		s := n.Value
		if r := []rune(s); len(r) > 40 {
			s = string(r[:39]) + "…"
		}
		return strconv.Quote(s)
	}
	return "an alias"
}

// KeyLines returns the line of every key of the loopr.yml in data, by
// dotted key as in errors (list elements as key[i]): for messages about a
// valid file's values found later (`loopr config check`). Keys after a
// problem that makes Parse fail are missing.
func KeyLines(data []byte) map[string]int {
	d := &decoder{pos: map[string]int{}}
	root, err := d.document(data)
	if err != nil || root == nil {
		return d.pos
	}
	_ = d.value(root, "", 0, reflect.ValueOf(Default()).Elem())
	return d.pos
}
