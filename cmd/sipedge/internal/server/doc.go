// Package server wires sipedge together from its configuration: the
// sharded runtime (shard), one B2BUA engine per shard (dialog/b2bua), the
// carrier plane (carrier: one Plane, a Shard of it per shard), the routing
// decision (route/lcr: a Router per shard), the CDR writer (dialog/cdr)
// and the admin HTTP API. It holds no call or carrier rule of its own: it
// turns the configuration into those objects, posts what they answer
// later (an LCR lookup, a CPS reservation in Redis) back to the shard that
// asked, serves the admin API, and starts and stops them. cmd/sipedge runs
// it, and cmd/sipedge/embed runs it inside another program with that
// program's b2bua.Policy (NewWithPolicy), whose OnAnswer and
// OnRouteFailure run after the carrier plane's per-carrier metrics.
//
// # Trunks
//
// The trunks (trunks.go) are the YAML's, fixed, then those the admin API
// (/v1/trunks) added: the shared layer's (below). Every change publishes a new
// b2bua.TrunkSet, which all the engines share through one atomic pointer;
// calls in progress keep the trunk they began with, its ingress CPS key
// (registered as the trunk is added, at the limit it names) and its LCR
// attributes with it. A trunk's counters (b2bua.TrunkStats: its live calls
// and metrics) are per name (Server.trunkStats), so a replacement keeps
// counting the calls of the version it replaced. With fleet.redis a
// trunk's max_concurrent_calls is its fleet Channel "trunk:<name>", held
// across the fleet and shared by its versions as its counters are; a
// gateway group's is the carrier plane's (carrier.Options.Fleet). The
// flood guard exempts the sources of the set in force.
//
// # Static routes
//
// In static mode (no lcr.api_url) the shards route by the lcr.StaticTable
// behind Server.static, one atomic load per new call. The admin API
// (/v1/lcr/static_routes, static.go) replaces the table whole: it is
// checked by the YAML's rules (config.ValidateStaticRoutes, against the
// gateway groups the health registry knows now), built, then published.
// A published table is never modified: calls in progress hold its routes
// and keep them. A PUT table is the shared layer's (below), in force over
// the file's. The flood guard exempts the YAML table's next hops from the
// start, a new table's once dialled.
//
// # The fleet and the layers
//
// The server joins the fleet (fleet.go, fleet:) before it builds what the
// fleet keeps, and reads the shared state before the listeners open. The
// admin API's changes of groups (groups.go), trunks and the static table
// are written to the fleet's shared state and applied by Server.applyShared
// on every node, this one included; shared.go states how that layer and
// each node's file meet.
//
// # Dry runs
//
// POST /v1/route and sipedge route (dryrun.go) say where a call would go
// without placing it, from the libraries' own side-effect-free views: the
// decision (lcr.Resolver.Explain), each carrier (carrier.Plane.Preview)
// and what its INVITE would carry (b2bua.Config.Present). On a running
// node they read its live state; RouteFromConfig builds the parts from the
// configuration alone (no probes, no Redis, no calls). Both answer a
// RouteAnswer; WriteRoute prints it.
//
// # Live calls
//
// GET /v1/calls and DELETE /v1/calls/{a_call_id} (calls.go) reach the
// calls where they live, on their shards: a listing posts
// Engine.AppendCalls to every shard and gathers the answers (at most
// shardWait; a shard that is late is named, not waited for), an end posts
// Engine.EndCall to the shard the Call-ID hashes to (shard.Server.OwnerOf).
// Nothing on the call path takes a lock for them.
//
// # Reload
//
// POST /v1/reload (reload.go) re-reads the file the server started from
// (SetConfigFile) by the start-up rules and applies its reloadable parts:
// the gateway groups (carrier.Plane.SyncFixed), the trunks
// (trunks.syncFixed) and, in static mode, the static table. Everything that
// can be refused is checked before anything changes. The order, groups
// added and replaced, then trunks, then the table, then groups removed,
// means a new call never finds a route to a group not there yet. Server.cfg
// stays the configuration sipedge started with: the settings that need a
// restart are compared with it, the reloadable parts with what the
// registries hold now. A mutex (Server.changeMu) serialises reloads and
// the admin API's changes, so that they never interleave; Server.layerMu
// keeps the shared layer's changes, which other nodes make, out of a
// reload's.
//
// # Quality routing
//
// The carrier plane is built with the quality: section
// (carrier.Options.Quality), one collector per shard; each run of a
// shard's loop ticks it (Handler.Tick), and the plane's Start runs the
// reader. /v1/quality is the
// Monitor's own handler, behind the admin guard. With lcr.cache naming a
// Redis, the disables persist there (quality/redisstore, Server.disables,
// closed after the plane so that the last change is written). With
// lcr.send_quality the resolver asks Server.qualityScores for each API
// request's scores, on its lookup goroutine. A quality change needs a
// restart (restart_required).
package server
