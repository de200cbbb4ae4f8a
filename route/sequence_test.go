package route

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/script"
)

// The scripts in testdata/*.txt drive a Sequence through call flows
// (internal/script: a command line, "----", then the expected output up to
// a blank line; "#" lines are comments). They are the specification of the
// sequential failover rules, one script per rule. go test -run TestScripts
// -rewrite rewrites the expected outputs.
//
// Commands:
//
//	options [ring=D|none] [global=C,C|none] [group=NAME:C,C|NAME:none ...]
//	        sequence options for the next routes/restart (none = empty set)
//	routes SPEC ...     NewSequence over the routes
//	restart SPEC ...    Restart over the routes
//	next T              Next at time T (a duration: 0s, 6s, 1m)
//	dialed T            Dialed at time T: the INVITE left (later: a CPS wait)
//	undialable T REASON
//	progress T CODE
//	final T CODE [PHRASE ...]
//	timeout T
//	abandon T
//	attempts            the attempts, as the JSON of the CDR's lcr_attempts
//	active              the active route
//	last                whether the route in flight is the last (Last)
//
// A route SPEC is ID[:timeout=N][:group=G][:causes=C,C|none][:rap], rap
// being reroute_after_progress; the gateway group defaults to ID.
//
// Output of an input: "cancel ID" if the step cancels, "burned ID STATUS
// elapsed=MS [undialed] [reason=R] [pdd=MS]" if it records an attempt, then
// the step: "none", "wait deadline=D", "dial ID deadline=D", "answered ID
// [pdd=MS]",
// "fail CODE PHRASE [own]"; then "= STATE [ID] [deadline=D]".

func TestScripts(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(t *testing.T) func(*script.Command) string {
		d := &driver{t: t}
		return func(c *script.Command) string { return strings.Join(d.run(c.Line), "\n") }
	})
}

type driver struct {
	t   *testing.T
	opt SequenceOptions
	seq *Sequence
	out []string
}

func (d *driver) printf(format string, args ...any) {
	d.out = append(d.out, fmt.Sprintf(format, args...))
}

func (d *driver) run(line string) (out []string) {
	d.out = nil
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	defer func() {
		if r := recover(); r != nil {
			d.printf("panic: %v", r)
			out = d.out
		}
	}()
	switch cmd {
	case "options":
		d.opt = d.options(args)
		d.printf("ok")
		return d.out
	case "routes":
		d.seq = NewSequence(d.routes(args), d.opt)
	case "restart":
		d.seq.Restart(d.routes(args), d.opt)
	case "next":
		d.step(d.seq.Next(d.dur(args[0])))
	case "undialable":
		d.step(d.seq.Undialable(d.dur(args[0]), args[1]))
	case "dialed":
		d.seq.Dialed(d.dur(args[0]))
	case "progress":
		d.step(d.seq.Progress(d.dur(args[0]), d.atoi(args[1])))
	case "final":
		d.step(d.seq.Final(d.dur(args[0]), d.atoi(args[1]), strings.Join(args[2:], " ")))
	case "timeout":
		d.step(d.seq.Timeout(d.dur(args[0])))
	case "abandon":
		d.step(d.seq.Abandon(d.dur(args[0])))
	case "attempts":
		b, err := json.Marshal(d.seq.Attempts())
		if err != nil {
			d.t.Fatal(err)
		}
		d.printf("%s", b)
		return d.out
	case "last":
		d.printf("%v", d.seq.Last())
		return d.out
	case "active":
		if r, i, ok := d.seq.ActiveRoute(); ok {
			d.printf("%s (route %d) rate=%v", r.CarrierID, i, r.Rate)
		} else {
			d.printf("none")
		}
		return d.out
	default:
		d.t.Fatalf("unknown command %q", cmd)
	}
	d.state()
	return d.out
}

func (d *driver) id(i int) string { return d.seq.routes[i].CarrierID }

func (d *driver) step(st Step) {
	if st.Cancel {
		d.printf("cancel %s", d.id(st.BurnedRoute))
	}
	if st.Burned {
		a := st.Attempt
		if a.CarrierID != d.id(st.BurnedRoute) {
			d.t.Errorf("burned route %d is not %s", st.BurnedRoute, a.CarrierID)
		}
		line := fmt.Sprintf("burned %s %d elapsed=%dms", a.CarrierID, a.Status, a.ElapsedMs)
		if !a.Dialed {
			line += " undialed"
		}
		if a.Reason != "" {
			line += " reason=" + a.Reason
		}
		if a.PDD != 0 {
			line += fmt.Sprintf(" pdd=%dms", a.PDD.Milliseconds())
		}
		d.printf("%s", line)
		if last := d.seq.Attempts(); len(last) == 0 || last[len(last)-1] != a {
			d.t.Errorf("the step's attempt is not the last recorded")
		}
	}
	switch st.Kind {
	case StepNone:
		d.printf("none")
	case StepWait:
		d.printf("wait deadline=%s", deadline(st.Deadline))
	case StepDial:
		d.printf("dial %s deadline=%s", d.id(st.Route), deadline(st.Deadline))
	case StepAnswered:
		line := "answered " + d.id(st.Route)
		if dialed, progress := d.seq.Timing(); progress != 0 {
			line += fmt.Sprintf(" pdd=%dms", (progress - dialed).Milliseconds())
		}
		d.printf("%s", line)
	case StepFail:
		line := fmt.Sprintf("fail %d %s", st.Code, st.Reason)
		if st.Own {
			line += " own"
		}
		d.printf("%s", line)
	}
}

func (d *driver) state() {
	s := d.seq
	line := "= " + s.state.String()
	switch s.state {
	case stCalling, stRinging:
		line += " " + d.id(s.cur) + " deadline=" + deadline(s.deadline)
	case stAnswered:
		line += " " + d.id(s.cur)
	}
	d.printf("%s", line)
}

func deadline(d time.Duration) string {
	if d == NoDeadline {
		return "none"
	}
	return d.String()
}

func (d *driver) dur(s string) time.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		d.t.Fatal(err)
	}
	return v
}

func (d *driver) atoi(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		d.t.Fatal(err)
	}
	return v
}

// causes parses C,C or none (an empty, set list).
func (d *driver) causes(s string) []int {
	out := []int{}
	if s == "none" {
		return out
	}
	for _, c := range strings.Split(s, ",") {
		out = append(out, d.atoi(c))
	}
	return out
}

func (d *driver) options(args []string) SequenceOptions {
	var o SequenceOptions
	groups := map[string][]int{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "ring":
			if v == "none" {
				o.RingTimeout = NoRingBound
			} else {
				o.RingTimeout = d.dur(v)
			}
		case "global":
			o.GlobalCauses = d.causes(v)
		case "group":
			name, c, _ := strings.Cut(v, ":")
			groups[name] = d.causes(c)
		default:
			d.t.Fatalf("unknown option %q", a)
		}
	}
	if len(groups) > 0 {
		o.GroupCauses = func(g string) []int { return groups[g] }
	}
	return o
}

func (d *driver) routes(args []string) []Route {
	var rs []Route
	for i, spec := range args {
		parts := strings.Split(spec, ":")
		r := Route{CarrierID: parts[0], GatewayGroup: parts[0], Rate: 0.001 * float64(i+1)}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			switch k {
			case "timeout":
				r.TimeoutSecs = d.atoi(v)
			case "group":
				r.GatewayGroup = v
			case "causes":
				r.RerouteCauses = d.causes(v)
			case "rap":
				r.RerouteAfterProgress = true
			default:
				d.t.Fatalf("unknown route option %q", p)
			}
		}
		rs = append(rs, r)
	}
	return rs
}
