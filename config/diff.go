package config

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Change is one setting that differs between two configurations.
type Change struct {
	Key string // dotted key, as in errors: scheduler.priority.ralph, webhooks[0].url
	// Old and New are the values in YAML flow style; "(none)" for a map
	// entry or list element that one side lacks.
	Old, New string
}

// String formats c as "scheduler.priority.ralph: 100 → 120".
func (c Change) String() string { return c.Key + ": " + c.Old + " → " + c.New }

// absent stands for a map entry or list element one side lacks.
const absent = "(none)"

// Diff lists the settings that differ from a to b, in the order of
// loopr.yml (map entries by name). A map entry or list element present on
// one side only is one change carrying the whole value. File is ignored.
func Diff(a, b *Config) []Change {
	var out []Change
	diffValue(reflect.ValueOf(*a), reflect.ValueOf(*b), "", &out)
	return out
}

func diffValue(a, b reflect.Value, key string, out *[]Change) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			switch {
			case name == "" && opts == "inline":
				diffValue(a.Field(i), b.Field(i), key, out)
			case name != "" && name != "-":
				diffValue(a.Field(i), b.Field(i), joinKey(key, name), out)
			}
		}
	case reflect.Map:
		keys := map[string]bool{}
		for _, k := range a.MapKeys() {
			keys[k.String()] = true
		}
		for _, k := range b.MapKeys() {
			keys[k.String()] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		slices.SortFunc(names, cmp.Compare)
		for _, name := range names {
			kv := reflect.ValueOf(name).Convert(a.Type().Key())
			av, bv := a.MapIndex(kv), b.MapIndex(kv)
			sub := joinKey(key, name)
			switch {
			case !av.IsValid():
				*out = append(*out, Change{Key: sub, Old: absent, New: flow(bv)})
			case !bv.IsValid():
				*out = append(*out, Change{Key: sub, Old: flow(av), New: absent})
			default:
				diffValue(av, bv, sub, out)
			}
		}
	case reflect.Slice:
		if a.Type().Elem().Kind() != reflect.Struct {
			if !reflect.DeepEqual(normSlice(a), normSlice(b)) {
				*out = append(*out, Change{Key: key, Old: flow(a), New: flow(b)})
			}
			return
		}
		for i := range max(a.Len(), b.Len()) {
			sub := fmt.Sprintf("%s[%d]", key, i)
			switch {
			case i >= a.Len():
				*out = append(*out, Change{Key: sub, Old: absent, New: flow(b.Index(i))})
			case i >= b.Len():
				*out = append(*out, Change{Key: sub, Old: flow(a.Index(i)), New: absent})
			default:
				diffValue(a.Index(i), b.Index(i), sub, out)
			}
		}
	default:
		if !a.Equal(b) {
			c := Change{Key: key, Old: flow(a), New: flow(b)}
			if secretKeys[key] { // the change is logged and journaled: never the secret
				c.Old, c.New = hidden(a), hidden(b)
			}
			*out = append(*out, c)
		}
	}
}

// secretKeys are settings whose values Diff does not show.
var secretKeys = map[string]bool{"store.etcd.password": true}

func hidden(v reflect.Value) string {
	if v.IsZero() {
		return `""`
	}
	return "(hidden)"
}

// normSlice treats a nil and an empty list alike.
func normSlice(v reflect.Value) any {
	if v.Len() == 0 {
		return nil
	}
	return v.Interface()
}

// flow renders v as YAML in flow style, on one line.
func flow(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Int:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	}
	var n yaml.Node
	if err := n.Encode(v.Interface()); err != nil {
		return fmt.Sprint(v.Interface())
	}
	setFlow(&n)
	b, err := yaml.Marshal(&n)
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	return strings.TrimSpace(string(b))
}

func setFlow(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
	}
	for _, c := range n.Content {
		setFlow(c)
	}
}
