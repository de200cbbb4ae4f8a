package config

import (
	"bufio"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// referencePath is the configuration reference this package's keys are
// checked against.
const referencePath = "../../../../docs/configuration.md"

// configKeys walks t as the decoder does (fieldsOf) and returns every key
// an operator can write, as a path: "gateway.groups[].probe.interval_secs".
// A struct's keys are listed, not the struct itself; a text-decoded type, a
// map or a list of scalars is one key.
func configKeys(t reflect.Type, path string) []string {
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return []string{path}
	}
	switch t.Kind() {
	case reflect.Pointer: // an optional section: its keys
		return configKeys(t.Elem(), path)
	case reflect.Struct:
		var keys []string
		for _, f := range fieldsOf(t) {
			keys = append(keys, configKeys(t.Field(f.index).Type, joinPath(path, f.key))...)
		}
		return keys
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Struct && !reflect.PointerTo(e).Implements(textUnmarshaler) {
			return configKeys(e, path+"[]")
		}
	}
	return []string{path}
}

// referenceRow is one key of docs/configuration.md: a table row whose first
// cell is the key's path in backquotes.
type referenceRow struct {
	line         int
	typ, dflt    string
	meaningEmpty bool
}

// readReference returns the keys the reference documents, by path.
func readReference(t *testing.T) map[string]referenceRow {
	t.Helper()
	f, err := os.Open(referencePath)
	if err != nil {
		t.Fatalf("cannot open the configuration reference: %v", err)
	}
	defer f.Close()
	rows := map[string]referenceRow{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		cells := tableCells(sc.Text())
		if len(cells) != 4 || !strings.HasPrefix(cells[0], "`") || !strings.HasSuffix(cells[0], "`") {
			continue
		}
		key := strings.Trim(cells[0], "`")
		if _, dup := rows[key]; dup {
			t.Errorf("%s:%d: %s documented twice", referencePath, n, key)
		}
		rows[key] = referenceRow{line: n, typ: cells[1], dflt: cells[2], meaningEmpty: cells[3] == ""}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// tableCells splits a Markdown table row into its trimmed cells; a "|"
// inside backquotes, as in `udp\|tcp`, is escaped and does not split.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	line = strings.ReplaceAll(line[1:len(line)-1], `\|`, "\x00")
	cells := strings.Split(line, "|")
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|")
	}
	return cells
}

// TestReferenceDocumentsEveryKey fails when a key is added to the
// configuration without a row in docs/configuration.md, or a row names a
// key that is gone; every row has a type and a meaning.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	rows := readReference(t)
	keys := configKeys(reflect.TypeFor[Config](), "")
	for _, k := range keys {
		row, ok := rows[k]
		switch {
		case !ok:
			t.Errorf("%s: key %s is not documented: add its row (| `%s` | type | default | meaning |)", referencePath, k, k)
		case row.typ == "" || row.meaningEmpty:
			t.Errorf("%s:%d: %s needs a type and a meaning", referencePath, row.line, k)
		}
	}
	for k, row := range rows {
		if !slices.Contains(keys, k) {
			t.Errorf("%s:%d: %s is documented but is no configuration key", referencePath, row.line, k)
		}
	}
}

// TestReferenceDefaults: a Default cell that is one literal in backquotes
// is what check-config prints for that key when the file leaves it out
// (testdata/reference.yaml sets one of each list element's required keys,
// whose rows say so instead).
func TestReferenceDefaults(t *testing.T) {
	fixture, err := os.ReadFile("testdata/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(fixture, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	printed := flattenYAML(t, []byte(cfg.String()))
	set := flattenYAML(t, fixture)
	for key, row := range readReference(t) {
		lit, ok := literal(row.dflt)
		if !ok {
			continue
		}
		if _, inFixture := set[key]; inFixture {
			t.Errorf("%s:%d: %s: testdata/reference.yaml sets it, so its default cannot be checked: say what it must be instead of a literal", referencePath, row.line, key)
			continue
		}
		got, ok := printed[key]
		if !ok {
			t.Errorf("%s:%d: %s: check-config prints no value to check the default `%s` against", referencePath, row.line, key, lit)
			continue
		}
		if got != lit {
			t.Errorf("%s:%d: %s: the default is `%s`, documented `%s`", referencePath, row.line, key, got, lit)
		}
	}
}

// literal returns the text of a cell that is exactly one `literal`.
func literal(cell string) (string, bool) {
	if len(cell) < 2 || cell[0] != '`' || cell[len(cell)-1] != '`' || strings.Count(cell, "`") != 2 {
		return "", false
	}
	return cell[1 : len(cell)-1], true
}

// flattenYAML maps each key path of a YAML document (the first element of a
// list of mappings standing for all: "trunks[].name") to its value as YAML
// writes it on one line.
func flattenYAML(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch {
		case n.Kind == yaml.DocumentNode:
			walk(n.Content[0], path)
			return
		case n.Kind == yaml.MappingNode && slices.Contains(mapKeys, path):
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], joinPath(path, n.Content[i].Value))
			}
			return
		case n.Kind == yaml.SequenceNode && len(n.Content) > 0 && n.Content[0].Kind == yaml.MappingNode:
			walk(n.Content[0], path+"[]")
			return
		}
		n.Style |= yaml.FlowStyle
		b, err := yaml.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = strings.TrimSpace(string(b))
	}
	walk(&root, "")
	return out
}

// mapKeys are the configuration keys whose values are maps: their entries
// are their value, not keys of their own.
var mapKeys = func() []string {
	var keys []string
	for _, k := range configKeys(reflect.TypeFor[Config](), "") {
		if typeAt(reflect.TypeFor[Config](), k).Kind() == reflect.Map {
			keys = append(keys, k)
		}
	}
	return keys
}()

// typeAt returns the type of the key at path under t.
func typeAt(t reflect.Type, path string) reflect.Type {
	for _, part := range strings.Split(path, ".") {
		part = strings.TrimSuffix(part, "[]")
		for _, f := range fieldsOf(t) {
			if f.key == part {
				t = t.Field(f.index).Type
				break
			}
		}
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return t
}
