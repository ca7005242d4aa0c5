// Package sourcedtest is Given / When / Then testing for deciders,
// projectors, projections and statechart machines (Machine: given history
// or stored paths, when a command or event, then the state events, data
// events, dispatches, timers and configuration), with no store, router or
// consumer group: the helpers call the definitions' pure functions
// directly.
//
//	func TestDuplicateName(t *testing.T) {
//		sourcedtest.Decider(t, CourseDecider).
//			Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
//			When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
//			ThenError(`course "Algebra" already exists`)
//	}
//
// Messages are compared by Go type and payload only: ids, times,
// causation, correlation and metadata are ignored, so tests need not match
// generated values. Expected messages may be given as payloads or as
// core.Messages.
//
// With WithRegistry the definition is checked against the registry
// (partition schema and all) before the test runs, as the router would at
// registration, and every given and expected payload is validated.
package sourcedtest
