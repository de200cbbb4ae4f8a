package server

import (
	"fmt"
	"sync"

	"github.com/sipedge/sipedge/fleet"
)

// The runtime state in layers. Each node's configuration file is its base
// layer: the gateway groups and trunks it names are fixed (a reload
// changes them), and its static table is the table unless the fleet has
// one. The fleet's shared documents (fleet.Put: the admin API's groups,
// trunks and static table) are the run-time layer, common to the fleet
// and read back by a node that starts:
//
//   - a group or trunk: on a name both layers define, the file's wins on
//     that node, which logs the shared document it shadows; the admin API
//     refuses to change or remove a name the node's file defines (409);
//   - the static table is one document: a PUT table is the table in force
//     on every node, the file's underneath it;
//   - POST /v1/reload re-reads the node's file only: it never writes
//     shared groups or trunks. A shared document the file shadowed stays
//     stored (other nodes may not have the name), and applies again on
//     this node once the file drops the name. A reload whose file changed
//     the static table deletes the shared table, for the whole fleet (the
//     file's change wins, as it replaced a PUT table before the fleet):
//     with Redis down that reload is refused (503), nothing changed.
//
// Without fleet.redis the shared layer is this node's alone, in process
// (fleet.New without Redis), and a restart loses it.

// sharedDocs is the shared layer as this node has applied it, kind ->
// name -> document: what a reload applies again where the file stops
// shadowing it. Guarded by Server.layerMu.
type sharedDocs map[string]map[string][]byte

// applyShared is the fleet's apply (fleet.Follow): each change of a shared
// document, on every node, the writer's included, in version order per
// document. It runs on the fleet's goroutine, or the admin request's that
// wrote the change, under Server.layerMu, which a reload holds while it
// changes the file's layer: the two never interleave.
func (s *Server) applyShared(ch fleet.Change) error {
	s.layerMu.Lock()
	defer s.layerMu.Unlock()
	docs := s.shared[ch.Kind]
	if docs == nil {
		docs = make(map[string][]byte)
		s.shared[ch.Kind] = docs
	}
	if ch.Doc == nil {
		delete(docs, ch.Name)
	} else {
		docs[ch.Name] = ch.Doc
	}
	switch ch.Kind {
	case kindGroup:
		return s.groups.apply(ch.Name, ch.Doc)
	case kindTrunk:
		return s.trunks.apply(ch.Name, ch.Doc)
	case kindStatic:
		if ch.Name != staticDoc {
			return fmt.Errorf("no static table called %q", ch.Name)
		}
		return s.staticRoutes.apply(ch.Doc)
	case kindQualityDisable:
		return s.applyQualityDisable(ch)
	}
	// A kind this node does not apply (a newer node's): kept, not applied.
	s.unknownKinds.Do(func() {
		s.log.Warn("fleet: shared documents of a kind this node does not apply, ignored", "kind", ch.Kind)
	})
	return nil
}

// sharedDoc returns the shared document name of kind as this node has
// applied it, nil when there is none. Call with Server.layerMu held.
func (s *Server) sharedDoc(kind, name string) []byte { return s.shared[kind][name] }

// hasSharedStatic reports whether the fleet has a shared static table.
func (s *Server) hasSharedStatic() bool {
	s.layerMu.Lock()
	defer s.layerMu.Unlock()
	return s.sharedDoc(kindStatic, staticDoc) != nil
}

// unshadow applies again, after a reload, the shared documents of the
// groups and trunks its file no longer shadows (removed from the file's
// layer). Call with Server.layerMu held.
func (s *Server) unshadow(groups, trunks []string) {
	for _, name := range groups {
		if doc := s.sharedDoc(kindGroup, name); doc != nil {
			if err := s.groups.apply(name, doc); err != nil {
				s.log.Error("reload: cannot apply the shared group the file shadowed", "group", name, "error", err)
			} else {
				s.log.Info("reload: the shared group the file shadowed applies again", "group", name)
			}
		}
	}
	for _, name := range trunks {
		if doc := s.sharedDoc(kindTrunk, name); doc != nil {
			if err := s.trunks.apply(name, doc); err != nil {
				s.log.Error("reload: cannot apply the shared trunk the file shadowed", "trunk", name, "error", err)
			} else {
				s.log.Info("reload: the shared trunk the file shadowed applies again", "trunk", name)
			}
		}
	}
}

// layerFields are the Server's fields of the layers, embedded.
type layerFields struct {
	// layerMu serialises the shared layer's applies and a reload's changes
	// of the file's layer. Never call the fleet's Put, Delete, Get or List
	// holding it: an apply runs under the fleet's own lock and takes it.
	layerMu      sync.Mutex
	shared       sharedDocs
	unknownKinds sync.Once
}
