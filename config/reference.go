package config

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// KeyDoc documents one key of loopr.yml, as the template writes it.
type KeyDoc struct {
	Key     string // dotted: "concurrency.per_type.plan"
	Default string // the value as the template writes it ("50", `["go test ./..."]`); "" for a section
	Meaning string // the template's comment on the key's line
	Section bool   // a mapping of further keys
	// Note is the comment block above the key, when the template has one
	// (the examples of quotas, webhooks and types), without the '#'s.
	Note string
}

// Reference lists every key of the template in file order, with its default
// and comment: the configuration reference (docs/configuration.md is
// generated from it). The template holds every key the decoder accepts with
// its default (tests keep it so), so the reference cannot drift from them.
func Reference() []KeyDoc {
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		panic("config: the embedded template does not parse: " + err.Error()) // a test would have caught it
	}
	lines := strings.Split(string(template), "\n")
	var out []KeyDoc
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := joinKey(prefix, k.Value)
			comment := k.LineComment
			if comment == "" {
				comment = v.LineComment
			}
			d := KeyDoc{Key: key, Meaning: strings.TrimSpace(strings.TrimPrefix(comment, "#")), Note: uncomment(k.HeadComment)}
			if v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 {
				d.Section = true
				out = append(out, d)
				walk(v, key)
				continue
			}
			// The value as written: the rest of the key's line, before the comment.
			line := lines[k.Line-1]
			_, val, _ := strings.Cut(line[k.Column-1:], ":")
			if c := strings.Index(val, "  #"); c >= 0 {
				val = val[:c]
			}
			d.Default = strings.TrimSpace(val)
			out = append(out, d)
		}
	}
	walk(doc.Content[0], "")
	return out
}

// uncomment strips the "# " of each line of a YAML comment block.
func uncomment(c string) string {
	if c == "" {
		return ""
	}
	lines := strings.Split(c, "\n")
	for i, l := range lines {
		l = strings.TrimPrefix(strings.TrimSpace(l), "#")
		lines[i] = strings.TrimPrefix(l, " ")
	}
	return strings.Join(lines, "\n")
}
