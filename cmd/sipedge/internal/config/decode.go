package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// The decoder walks yaml.v3 nodes into the Config structs by their yaml
// tags, so that an unknown key or a bad value is reported at its exact
// path and line, and every problem is reported, not just the first.

// presetter is implemented by types whose defaults must be in place before
// their node is decoded: where a zero in the file means something other
// than "the default" (ring_timeout_secs: 0 is "no ring bound"). Types of
// other packages (health.GroupConfig) implement it too.
type presetter interface{ Preset() }

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
)

type decoder struct {
	lines map[string]int // path -> line of its value
	errs  ErrorList
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// field is a struct field reachable by its yaml key.
type field struct {
	index int
	key   string
	unit  time.Duration // for time.Duration fields: from the key's suffix
}

var fieldCache sync.Map // reflect.Type -> []field

func fieldsOf(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	var fs []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if key == "" || key == "-" || !sf.IsExported() {
			continue
		}
		f := field{index: i, key: key}
		if sf.Type == durationType {
			f.unit = unitOf(key)
		}
		fs = append(fs, f)
	}
	fieldCache.Store(t, fs)
	return fs
}

func unitOf(key string) time.Duration {
	switch {
	case strings.HasSuffix(key, "_us"):
		return time.Microsecond
	case strings.HasSuffix(key, "_ms"):
		return time.Millisecond
	case strings.HasSuffix(key, "_secs"):
		return time.Second
	}
	panic("config: duration field " + key + " has no _us, _ms or _secs suffix")
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapKeyPath names a map entry: .key when the key is plain, else ["key"].
func mapKeyPath(path, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return joinPath(path, key)
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// decode decodes n into v (addressable). unit is not 0 for durations. A
// null node leaves v as it is: a key with no value is an absent key.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, unit time.Duration) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if _, ok := d.lines[path]; !ok || n.Line > 0 {
		d.lines[path] = n.Line
	}
	if isNull(n) {
		return
	}
	if v.Kind() == reflect.Pointer { // optional: nil when absent
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path, unit)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "want a string, got %s", describe(n))
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			d.errorf(n, path, "%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "want a list, got %s", describe(n))
			return
		}
		if len(n.Content) == 0 {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			e := s.Index(i)
			if p, ok := e.Addr().Interface().(presetter); ok {
				p.Preset()
			}
			d.decode(item, e, fmt.Sprintf("%s[%d]", path, i), 0)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "want a mapping, got %s", describe(n))
			return
		}
		if len(n.Content) == 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				d.errorf(k, path, "want a string key, got %s", describe(k))
				continue
			}
			p := mapKeyPath(path, k.Value)
			if l, dup := seen[k.Value]; dup {
				d.errorf(k, p, "duplicate key (first at line %d)", l)
				continue
			}
			seen[k.Value] = k.Line
			e := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, e, p, 0)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "want a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.errorf(n, path, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		want := "an integer"
		if unit == time.Millisecond {
			want = "a whole number of milliseconds"
		} else if unit == time.Second {
			want = "a whole number of seconds"
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
		if n.Kind != yaml.ScalarNode || err != nil && !isRangeErr(err) {
			d.errorf(n, path, "want %s, got %s", want, describe(n))
			return
		}
		if i < 0 {
			d.errorf(n, path, "%s: must not be negative", n.Value)
			return
		}
		limit := int64(math.MaxInt32)
		if unit != 0 {
			limit = int64(100 * 365 * 24 * time.Hour / unit)
		}
		if err != nil || i > limit {
			d.errorf(n, path, "%s: too large", n.Value)
			return
		}
		if unit != 0 {
			i *= int64(unit)
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(n.Value, 64)
		if n.Kind != yaml.ScalarNode || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.errorf(n, path, "want a number, got %s", describe(n))
			return
		}
		if f < 0 {
			d.errorf(n, path, "%s: must not be negative", n.Value)
			return
		}
		v.SetFloat(f)
	default:
		panic("config: cannot decode into " + v.Type().String())
	}
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping, got %s", describe(n))
		return
	}
	fs := fieldsOf(v.Type())
	// Merged keys first: the mapping's own keys take precedence.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if isMerge(n.Content[i]) {
			d.merge(n.Content[i+1], v, path)
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if isMerge(k) {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "want a key, got %s", describe(k))
			continue
		}
		p := joinPath(path, k.Value)
		if l, dup := seen[k.Value]; dup {
			d.errorf(k, p, "duplicate key (first at line %d)", l)
			continue
		}
		seen[k.Value] = k.Line
		f, ok := lookup(fs, k.Value)
		if !ok {
			d.lines[p] = k.Line
			d.errorf(k, p, "unknown key%s", suggest(fs, k.Value))
			continue
		}
		d.decode(val, v.Field(f.index), p, f.unit)
	}
}

func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge"
}

// merge applies a YAML merge key (<<: *anchor, or a list of anchors where
// the first wins) to a struct.
func (d *decoder) merge(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		d.decodeStruct(n, v, path)
	case yaml.SequenceNode:
		for i := len(n.Content) - 1; i >= 0; i-- {
			d.merge(n.Content[i], v, path)
		}
	default:
		d.errorf(n, path, "<<: want a mapping or a list of mappings, got %s", describe(n))
	}
}

func lookup(fs []field, key string) (field, bool) {
	for _, f := range fs {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

// suggest returns " (did you mean X?)" for a close known key.
func suggest(fs []field, key string) string {
	best, bestD := "", 3
	for _, f := range fs {
		if dist := editDistance(strings.ToLower(key), f.key); dist < bestD {
			best, bestD = f.key, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// encode builds the YAML node for v; unit is not 0 for durations.
func encode(v reflect.Value, unit time.Duration) *yaml.Node {
	if v.Type().Implements(textMarshaler) {
		b, _ := v.Interface().(encoding.TextMarshaler).MarshalText()
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: string(b)}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
		}
		return encode(v.Elem(), unit)
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range fieldsOf(v.Type()) {
			n.Content = append(n.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: f.key},
				encode(v.Field(f.index), f.unit))
		}
		return n
	case reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		et := v.Type().Elem()
		if et.Kind() != reflect.Struct || et.Implements(textMarshaler) || v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		for i := 0; i < v.Len(); i++ {
			n.Content = append(n.Content, encode(v.Index(i), 0))
		}
		return n
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		for _, k := range keys {
			n.Content = append(n.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k},
				encode(v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())), 0))
		}
		return n
	case reflect.String:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.String()}
	case reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatBool(v.Bool())}
	case reflect.Int, reflect.Int64:
		i := v.Int()
		if unit != 0 {
			i /= int64(unit)
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatInt(i, 10)}
	case reflect.Float64:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatFloat(v.Float(), 'g', -1, 64)}
	}
	panic("config: cannot encode " + v.Type().String())
}
