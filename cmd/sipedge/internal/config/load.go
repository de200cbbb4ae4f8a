package config

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the file at path, expands it against the process environment
// and parses it as Parse does. Problems with the contents come back as an
// ErrorList whose entries carry path as their File.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data, os.LookupEnv)
	if el, ok := err.(ErrorList); ok {
		for _, e := range el {
			e.File = path
		}
	}
	return c, err
}

// Parse decodes data, expanding ${VAR}, ${VAR:-default} and $$ with env
// inside its scalars (expand.go), fills in the defaults and validates the
// result. env reports a variable's
// value and whether it is set, like os.LookupEnv; nil means an empty
// environment. Every problem found is returned at once as an ErrorList.
func Parse(data []byte, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	x := &expander{env: env}
	text := x.mark(data)
	if len(x.errs) > 0 {
		return nil, x.errs
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrorList{{Msg: "the configuration is empty"}}
		}
		return nil, ErrorList{yamlError(err)}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, ErrorList{{Line: next.Line, Msg: "more than one YAML document"}}
	case !errors.Is(err, io.EOF):
		return nil, ErrorList{yamlError(err)}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	x.expand(doc, "")
	if len(x.errs) > 0 {
		x.errs.sort()
		return nil, x.errs
	}
	if isNull(doc) {
		return nil, ErrorList{{Line: doc.Line, Msg: "the configuration is empty"}}
	}

	c := new(Config)
	c.Preset()
	d := &decoder{lines: map[string]int{}}
	d.decodeStruct(doc, reflect.ValueOf(c).Elem(), "")
	if len(d.errs) > 0 {
		d.errs.sort()
		return nil, d.errs
	}
	c.fill()
	v := &validator{lines: d.lines}
	c.validate(v)
	if len(v.errs) > 0 {
		v.errs.sort()
		return nil, v.errs
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlError turns a yaml.v3 syntax error into an Error with its line.
func yamlError(err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Line: line, Msg: msg[len(m[0]):]}
	}
	return &Error{Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// Print writes the effective configuration, defaults included, as YAML
// that Parse reads back to an equal Config. A literal $ is written as $$
// so that expansion leaves it alone.
func (c *Config) Print(w io.Writer) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(encode(reflect.ValueOf(c).Elem(), 0)); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, strings.ReplaceAll(buf.String(), "$", "$$"))
	return err
}

// Redacted returns a copy of c with its secrets masked, for showing it: the
// admin token, the LCR API's Authorization header, carriers' passwords and
// the passwords in URLs. What Print writes of it does not load back as c.
func (c *Config) Redacted() *Config {
	const mask = "REDACTED"
	r := *c
	secret := func(s *string) {
		if *s != "" {
			*s = mask
		}
	}
	secret(&r.Admin.Token)
	secret(&r.LCR.AuthHeader)
	r.LCR.APIURL = redactedURL(r.LCR.APIURL)
	r.RateLimit.Redis = redactedURL(r.RateLimit.Redis)
	r.Fleet.Redis = redactedURL(r.Fleet.Redis)
	r.Quality.WebhookURL = redactedQuery(r.Quality.WebhookURL)
	r.Cache = slices.Clone(r.Cache)
	for i := range r.Cache {
		r.Cache[i].URL = redactedURL(r.Cache[i].URL)
	}
	r.Gateway.Groups = slices.Clone(r.Gateway.Groups)
	for i := range r.Gateway.Groups {
		if a := r.Gateway.Groups[i].Auth; a != nil {
			masked := *a
			secret(&masked.Password)
			r.Gateway.Groups[i].Auth = &masked
		}
	}
	return &r
}

// redactedQuery is redactedURL with the query's values masked too: a
// webhook's URL often carries its token there.
func redactedQuery(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.RawQuery == "" {
		return redactedURL(s)
	}
	q := u.Query()
	for k := range q {
		q[k] = []string{"xxxxx"}
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// String returns what Print writes.
func (c *Config) String() string {
	var b strings.Builder
	if err := c.Print(&b); err != nil {
		return "config: " + err.Error()
	}
	return b.String()
}
