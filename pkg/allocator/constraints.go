package allocator

import (
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// constraint is a claim-level constraint tracked during the search. add
// reports whether the device may join; every successful add is undone by
// exactly one remove, in reverse order.
type constraint interface {
	add(q *req, d *device) bool
	remove(q *req)
}

func newConstraints(specs []resourceapi.DeviceConstraint) []constraint {
	out := make([]constraint, 0, len(specs))
	for _, c := range specs {
		scope := constraintScope(c.Requests)
		switch {
		case c.MatchAttribute != nil:
			out = append(out, &matchConstraint{scope: scope, attr: *c.MatchAttribute})
		case c.DistinctAttribute != nil:
			out = append(out, &distinctConstraint{scope: scope, attr: *c.DistinctAttribute})
		}
	}
	return out
}

// constraintScope is the set of request names a constraint applies to;
// empty means all. A subrequest is in scope when its parent request or
// its own "request/subrequest" name is listed.
type constraintScope []string

func (s constraintScope) covers(q *req) bool {
	if len(s) == 0 {
		return true
	}
	for _, n := range s {
		if n == q.base || (q.subName != "" && n == q.name) {
			return true
		}
	}
	return false
}

// attributeOf finds a fully qualified attribute, accepting the short form
// when the domain is the device's driver.
func attributeOf(d *device, name resourceapi.FullyQualifiedName) *resourceapi.DeviceAttribute {
	if a, ok := d.api.Attributes[resourceapi.QualifiedName(name)]; ok {
		return &a
	}
	domain, id, ok := strings.Cut(string(name), "/")
	if !ok || domain != d.slice.Spec.Driver {
		return nil
	}
	if a, ok := d.api.Attributes[resourceapi.QualifiedName(id)]; ok {
		return &a
	}
	return nil
}

// matchConstraint: all devices in scope have the same value.
type matchConstraint struct {
	scope constraintScope
	attr  resourceapi.FullyQualifiedName
	value *resourceapi.DeviceAttribute
	n     int
}

func (m *matchConstraint) add(q *req, d *device) bool {
	if !m.scope.covers(q) {
		return true
	}
	a := attributeOf(d, m.attr)
	if a == nil {
		return false
	}
	if m.n > 0 && !sameValue(a, m.value) {
		return false
	}
	if m.n == 0 {
		m.value = a
	}
	m.n++
	return true
}

func (m *matchConstraint) remove(q *req) {
	if m.scope.covers(q) {
		m.n--
	}
}

// sameValue compares by the type of the new value; values of another
// type, or of no known type, never match.
func sameValue(a, b *resourceapi.DeviceAttribute) bool {
	switch {
	case a.StringValue != nil:
		return b.StringValue != nil && *a.StringValue == *b.StringValue
	case a.IntValue != nil:
		return b.IntValue != nil && *a.IntValue == *b.IntValue
	case a.BoolValue != nil:
		return b.BoolValue != nil && *a.BoolValue == *b.BoolValue
	case a.VersionValue != nil:
		// Semantic versions are kept in minimal form, so equal strings
		// mean equal versions.
		return b.VersionValue != nil && *a.VersionValue == *b.VersionValue
	}
	return false
}

// distinctConstraint: no two devices in scope share a value.
type distinctConstraint struct {
	scope  constraintScope
	attr   resourceapi.FullyQualifiedName
	values []*resourceapi.DeviceAttribute
}

func (m *distinctConstraint) add(q *req, d *device) bool {
	if !m.scope.covers(q) {
		return true
	}
	a := attributeOf(d, m.attr)
	if a == nil {
		return false
	}
	known := a.StringValue != nil || a.IntValue != nil || a.BoolValue != nil || a.VersionValue != nil
	for _, v := range m.values {
		if !known || sameValue(a, v) {
			return false
		}
	}
	m.values = append(m.values, a)
	return true
}

func (m *distinctConstraint) remove(q *req) {
	if m.scope.covers(q) {
		m.values = m.values[:len(m.values)-1]
	}
}
