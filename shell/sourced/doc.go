// Package sourced is the front door of Sourced for an application: the
// names an application calls to define its messages, deciders and
// projectors, open a store, decide and load, and run the background
// runtime. Start here; the packages behind it (codec, core, shell) hold
// the rest, for when you need it.
//
// An application imports this package and the package of the store it
// runs on (shell/sqlitestore for a SQLite file, shell/pgstore for
// PostgreSQL), and tests its definitions with sourcedtest, beside it.
// Every name here is an alias of, or a thin function over, the name in
// codec, core or shell that it documents, so values pass freely between
// this package and those.
//
// # Why here
//
// The package lives in shell/ because it runs on the shell (Handle, Load,
// NewRuntime); the dependency arrows (codec <- core <- effects <-
// statechart <- shell) allow it nowhere lower. It is named sourced, not
// app, because the name appears in every call of the application's code
// (sourced.Handle, sourced.Decider) and must not take a name the
// application wants for its own values (an App type, an app variable).
// It names no store: a PostgreSQL application's build carries no SQLite,
// and a SQLite one's no pgx.
//
// # 1. Messages
//
// Messages are plain structs, registered under stable type strings. The
// log indexes every message by the attributes of its payload. A command
// declares the attributes of its consistency boundary as required:
//
//	type CreateCourse struct {
//		CourseID   string `json:"course_id" sourced:"required"`
//		CourseName string `json:"course_name" sourced:"required"`
//	}
//	type CourseCreated struct {
//		CourseID   string `json:"course_id"`
//		CourseName string `json:"course_name"`
//	}
//
//	reg := sourced.NewRegistry()
//	err := errors.Join(
//		sourced.Register[CreateCourse](reg, "courses.create"),
//		sourced.Register[CourseCreated](reg, "courses.created"),
//	)
//
// # 2. Deciders
//
// A Decider decides commands in a boundary, its PartitionBy attributes,
// from the boundary's events: Evolve folds an event into the state,
// Decide turns a command into events or an error, React answers an event
// with follow-up messages (After: due later). Its functions are pure:
//
//	var Courses = sourced.Decider[bool]{Group: "courses.names", PartitionBy: []string{"course_name"}}.With(
//		sourced.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
//		sourced.Decide(func(taken bool, c CreateCourse) ([]any, error) {
//			if taken {
//				return nil, fmt.Errorf("course %q already exists", c.CourseName)
//			}
//			return []any{CourseCreated(c)}, nil
//		}),
//	)
//
// and a unit test decides a command on a history, with no store:
//
//	sourcedtest.Decider(t, Courses, sourcedtest.WithRegistry(reg)).
//		Given(CourseCreated{CourseID: "c1", CourseName: "Algebra"}).
//		When(CreateCourse{CourseID: "c2", CourseName: "Algebra"}).
//		ThenError(`course "Algebra" already exists`)
//
// # 3. A store
//
// Open the store with its own package and the registry:
//
//	store, err := sqlitestore.Install(ctx, "app.db", sqlitestore.Options{Registry: reg})
//	defer store.Close()
//
// # 4. Deciding and loading
//
// Handle decides a command synchronously, as a web handler does: the
// command and its events are appended in one transaction, or nothing is.
// Its errors say what to answer:
//
//	res, err := sourced.Handle(ctx, store, Courses, CreateCourse{CourseID: "c1", CourseName: "Algebra"})
//	switch {
//	case errors.Is(err, sourced.ErrInvalid): // 400: every failing field is named
//	case errors.Is(err, sourced.ErrBusy): // 503: try again
//	case err != nil: // 409: the decider refused it
//	}
//
// Load reads a state straight from the log, with the Guard of the read;
// an append with that guard fails with ErrConcurrentAppend if a message
// the read would have seen arrived since:
//
//	taken, guard, err := sourced.Load(ctx, store, Courses, sourced.Partition{"course_name": "Algebra"})
//	_, err = store.Append(ctx, sourced.Messages(event), sourced.AppendOptions{Guard: &guard})
//
// # 5. Read models
//
// A Projector folds each partition's events into a read model, and Sync
// writes it in the transaction that acknowledges them (on SQLite,
// sqlitestore.Conn(tx) is that transaction's connection), so the read
// model never misses an event nor sees one twice.
//
// # 6. The runtime
//
// Reactions, projectors, machines and workflows run on the runtime's
// workers: NewRuntime checks them against the store, Supervise runs them
// until SIGINT or SIGTERM and stops gracefully. A Module carries a
// bounded context's reactors as one value:
//
//	rt, err := sourced.NewRuntime(store, sourced.DefaultConfig(), sourced.Module{Courses, Enrolments, Rosters})
//	go sourced.Supervise(ctx, rt)
//
// # 7. Queues
//
// A Queue does jobs in the background, one message type per queue: append
// a job and one of the runtime's workers does it once and deletes it from
// the log. A failing job is tried again after a back-off as a new job
// counting its attempts, without holding up the others, and parked for an
// operator when its attempts run out:
//
//	certificates := sourced.NewQueue("students.certificates", func(ctx context.Context, job sourced.Job[SendCertificate]) error {
//		return mailer.Send(ctx, job.Payload.StudentID, job.Payload.CourseID)
//	})
//	rt, err := sourced.NewRuntime(store, sourced.DefaultConfig(), certificates)
//	_, err = store.Append(ctx, sourced.Messages(SendCertificate{StudentID: "ada", CourseID: "c1"}), sourced.AppendOptions{})
//
// # Further
//
// Statechart machines are built with package statechart and decided with
// shell.HandleMachine; durable workflows are shell/workflow; decisions
// across boundaries (core.Reads), composition (core.Combine, ...), error
// strategies and snapshots are in core; the operator side (consumer
// groups, parking, lag) is shell's, and the sourced command line
// (shell/pgstore/cmd/sourced) drives it.
package sourced
