package b2bua

import (
	"fmt"
	"runtime/debug"

	"github.com/sipedge/sipedge/route"
)

// The policy's hooks run inside the engine's processing of a call, on the
// shard: one that panics would end the process and every call on the
// node with it. Each runs here under a deferred recover, only when it is
// set (a call without hooks pays nothing), and a panic is logged with the
// call and the hook's name, counted in sipedge_policy_panics_total{hook},
// and answered as documented on Policy.

// Hooks, by their label in sipedge_policy_panics_total.
const (
	hookOnInvite = iota
	hookOnAnswer
	hookOnRouteFailure
	hookOnFailure
	numHooks
)

var hookNames = [numHooks]string{"OnInvite", "OnAnswer", "OnRouteFailure", "OnFailure"}

// onInvite runs the policy's OnInvite on d; false when it panicked, d
// then being what it left.
func (e *Engine) onInvite(c *Call, r *route.Request, d *route.Decision) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			e.hookPanicked(c, hookOnInvite, v)
			ok = false
		}
	}()
	e.env.Policy.OnInvite(r, d)
	return true
}

// onAnswer runs the policy's OnAnswer.
func (e *Engine) onAnswer(c *Call, r *route.Route) {
	defer func() {
		if v := recover(); v != nil {
			e.hookPanicked(c, hookOnAnswer, v)
		}
	}()
	e.env.Policy.OnAnswer(c, r)
}

// onRouteFailure runs the policy's OnRouteFailure.
func (e *Engine) onRouteFailure(c *Call, r *route.Route, a route.Attempt) {
	defer func() {
		if v := recover(); v != nil {
			e.hookPanicked(c, hookOnRouteFailure, v)
		}
	}()
	e.env.Policy.OnRouteFailure(c, r, a)
}

// onFailure runs the policy's OnFailure; a panic is the zero
// FailureAction: sipedge's own answer.
func (e *Engine) onFailure(c *Call, code int, reason string) (act FailureAction) {
	defer func() {
		if v := recover(); v != nil {
			e.hookPanicked(c, hookOnFailure, v)
			act = FailureAction{}
		}
	}()
	return e.env.Policy.OnFailure(c, code, reason)
}

// hookPanicked logs and counts a hook's panic v in call c.
func (e *Engine) hookPanicked(c *Call, hook int, v any) {
	e.m.hookPanics[hook].Inc()
	e.env.Log.Error("policy hook panicked; the call goes on with sipedge's own answer",
		"hook", hookNames[hook], "call_id", string(c.a.callID), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
}
