// Package testdomain holds the message types and deciders the tests of
// the root module share, declared once instead of in each test package:
// the course domain of the manual (CreateCourse, CourseCreated,
// EnrolStudent, ...), and the decisions across boundaries of the store
// conformance suite (LendingDecider, UsernameDecider, InvoiceDecider,
// CartDecider and their messages).
//
// Each test package registers the types under the names its assertions
// use; RegisterDecisions registers the decision fixtures under the names
// the suite uses.
//
// It lives under internal/ at the root of the module so that every package
// of the root module, and its tests, can import it while it stays out of
// the public API. The nested modules (shell/pgstore, bench, ...) do not
// import it: Go would allow it (the internal rule is by import path), but
// their tests would then compile against the internal API of whatever
// root version their go.mod requires, a coupling a release must not have;
// they use storetest's exported fixtures instead. Examples that show a user
// how to declare messages keep their own declarations.
package testdomain
