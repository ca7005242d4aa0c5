package storetest

import (
	"slices"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
)

// gen draws fixture messages, conditions and partitions from a small
// domain of values, so that random reads and writes overlap often. pick
// returns a number in [0, n); label names the draw (rapid shows it).
type gen struct {
	pick  func(n int, label string) int
	reg   *codec.Registry
	types []string // the message types to draw
}

// allTypes are the fixture types the random tests draw (the invalid Signup
// and Deposit are drawn on purpose elsewhere).
var allTypes = []string{
	typeDeviceRegistered, typeAssetRegistered, typeDeviceBound,
	typeCourseCreated, typeUserRegistered, typeUserJoinedCourse, typeCourseClosed,
	typeCourseReviewed, typeTransfer, typeReading,
}

// courseTypes are the types of the course fixtures, a domain where random
// guards contend often.
var courseTypes = []string{typeCourseCreated, typeUserRegistered, typeUserJoinedCourse, typeCourseClosed, typeCourseReviewed}

// readingTimes are the times Reading.At takes.
var readingTimes = [...]time.Time{epoch.Add(-time.Hour), epoch.Add(-time.Hour + 1500*time.Microsecond)}

// domain lists the values each attribute takes, as canonical key strings.
func domain(attr string) []string {
	switch attr {
	case "course_name":
		return []string{"Algebra", "History"}
	case "user_id":
		return []string{"joe", "jake"}
	case "name":
		return []string{"Joe", "Jake"}
	case "device_id":
		return []string{"d1", "d2"}
	case "asset_id":
		return []string{"a1", "a2"}
	case "label":
		return []string{"Boiler"}
	case "accounts":
		return []string{"acc1", "acc2", "acc3"}
	case "amount":
		return []string{"1", "2"}
	case "sensor_id":
		return []string{"s1", "s2"}
	case "count":
		return []string{"0", "1"}
	case "active":
		return []string{"false", "true"}
	case "at":
		out := make([]string, len(readingTimes))
		for i, t := range readingTimes {
			out[i], _ = codec.Canonical(t)
		}
		return out
	}
	panic("storetest: no domain for attribute " + attr)
}

func (g gen) value(attr string) string {
	vs := domain(attr)
	return vs[g.pick(len(vs), attr)]
}

func (g gen) oneOf(label string, vs []string) string { return vs[g.pick(len(vs), label)] }

// payload draws a message payload of one of g.types.
func (g gen) payload() any {
	switch typ := g.oneOf("type", g.types); typ {
	case typeDeviceRegistered:
		return deviceRegistered{DeviceID: g.value("device_id"), Name: g.value("name")}
	case typeAssetRegistered:
		return assetRegistered{AssetID: g.value("asset_id"), Label: g.value("label")}
	case typeDeviceBound:
		return deviceBound{g.value("device_id"), g.value("asset_id")}
	case typeCourseCreated:
		return courseCreated{CourseName: g.value("course_name")}
	case typeUserRegistered:
		return userRegistered{UserID: g.value("user_id"), Name: g.value("name")}
	case typeUserJoinedCourse:
		return userJoinedCourse{CourseName: g.value("course_name"), UserID: g.value("user_id")}
	case typeCourseClosed:
		return courseClosed{CourseName: g.value("course_name")}
	case typeCourseReviewed:
		r := courseReviewed{CourseName: g.value("course_name")}
		if g.pick(2, "reviewer?") == 1 {
			r.UserID = new(g.value("user_id"))
		}
		return r
	case typeTransfer:
		accounts := domain("accounts")
		var in []string
		for _, a := range accounts {
			if g.pick(2, "account "+a) == 1 {
				in = append(in, a)
			}
		}
		if len(in) == 0 {
			in = accounts[:1]
		}
		return transfer{Accounts: in, Amount: 1 + g.pick(2, "amount")}
	case typeReading:
		return reading{SensorID: g.value("sensor_id"), Count: g.pick(2, "count"), Active: g.pick(2, "active") == 1, At: readingTimes[g.pick(len(readingTimes), "at")]}
	default:
		panic("storetest: no generator for " + typ)
	}
}

// fields returns the attribute names of a registered type.
func (g gen) fields(typ string) []string {
	t, err := g.reg.ByName(typ)
	if err != nil {
		panic(err)
	}
	names := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		names[i] = f.Name
	}
	return names
}

// condition draws a condition on one of g.types with a random subset of
// its attributes (none: a type-only condition).
func (g gen) condition() core.Condition {
	c := core.Condition{Type: g.oneOf("condition type", g.types)}
	for _, f := range g.fields(c.Type) {
		if g.pick(2, "with "+f) == 1 {
			if c.Attrs == nil {
				c.Attrs = map[string]string{}
			}
			c.Attrs[f] = g.value(f)
		}
	}
	return c
}

// conditions draws between lo and hi conditions.
func (g gen) conditions(lo, hi int) []core.Condition {
	n := lo + g.pick(hi-lo+1, "conditions")
	out := make([]core.Condition, n)
	for i := range out {
		out[i] = g.condition()
	}
	return out
}

// partitionShapes are the attribute sets partitions are drawn over: those
// of the fixture deciders (course and user, device and asset, ...).
var partitionShapes = [][]string{
	{"course_name"}, {"user_id"}, {"course_name", "user_id"},
	{"device_id"}, {"asset_id"}, {"asset_id", "device_id"},
	{"accounts"}, {"sensor_id"}, {"active", "sensor_id"}, {"count"},
}

// partition draws a partition of one of the shapes that some of g.types
// declare, with values from the domain.
func (g gen) partition() map[string]string {
	var shapes [][]string
	for _, shape := range partitionShapes {
		if slices.ContainsFunc(g.types, func(typ string) bool { return slices.Contains(g.fields(typ), shape[0]) }) {
			shapes = append(shapes, shape)
		}
	}
	p := map[string]string{}
	for _, a := range shapes[g.pick(len(shapes), "partition shape")] {
		p[a] = g.value(a)
	}
	return p
}

// partitionTypes draws a subset of g.types to read partition p over
// (typeSubset), adding, when none of the drawn types declares any of p's
// attributes, the first of g.types that does: ReadPartition refuses a read
// that could only be empty (driver.CheckReadPartition).
func (g gen) partitionTypes(p map[string]string) []string {
	out := g.typeSubset()
	declares := func(typ string) bool {
		return slices.ContainsFunc(g.fields(typ), func(f string) bool { _, ok := p[f]; return ok })
	}
	if slices.ContainsFunc(out, declares) {
		return out
	}
	for _, t := range g.types {
		if declares(t) {
			i, _ := slices.BinarySearchFunc(out, t, func(a, b string) int {
				return slices.Index(g.types, a) - slices.Index(g.types, b)
			})
			return slices.Insert(out, i, t)
		}
	}
	return out
}

// typeSubset draws a non-empty subset of g.types, in g.types order.
func (g gen) typeSubset() []string {
	var out []string
	for _, t := range g.types {
		if g.pick(2, "handles "+t) == 1 {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		out = append(out, g.oneOf("handled type", g.types))
	}
	return out
}
