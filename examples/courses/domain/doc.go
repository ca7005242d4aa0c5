// Package domain is the course and enrolment example of the manual, on
// any store: its messages, deciders, projector and reactors, and Run, the
// scenario both mains run end to end (examples/courses on a SQLite file,
// shell/pgstore/examples/courses on PostgreSQL):
//
//   - CourseNames keeps course names unique (a decider partitioned by name);
//   - Enrolments enforces each course's capacity (a decider partitioned by
//     course) and reacts to every enrolment by dispatching NotifyStudent;
//   - Rosters is a projector writing each course's roster as JSON into a
//     table of the store's database (ReadModel), in the transaction of the
//     batch;
//   - Notifications handles NotifyStudent and, one second after a course is
//     created, the SendReminder the CourseNames decider scheduled.
package domain
