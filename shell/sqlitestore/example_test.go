package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// CourseCreated is the payload of the example's only message type.
type CourseCreated struct {
	CourseID   string `json:"course_id"`
	CourseName string `json:"course_name"`
}

// Install a store in a new file, append two messages, and read one back by
// an attribute; then append with the read's guard, which fails because a
// matching message arrived after the read.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlitestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	reg := codec.NewRegistry()
	if err := codec.Register[CourseCreated](reg, "courses.created"); err != nil {
		log.Fatal(err)
	}
	s, err := sqlitestore.Install(ctx, filepath.Join(dir, "app.db"), sqlitestore.Options{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	res, err := s.Append(ctx, []core.Message{
		core.NewMessage(CourseCreated{CourseID: "c1", CourseName: "Algebra"}),
		core.NewMessage(CourseCreated{CourseID: "c2", CourseName: "History"}),
	}, shell.AppendOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended at", res.Positions)

	conds := []core.Condition{{Type: "courses.created", Attrs: map[string]string{"course_id": "c1"}}}
	read, err := s.Read(ctx, conds, shell.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range read.Messages {
		fmt.Printf("read %d: %s %+v\n", m.Position, m.Type, m.Payload)
	}

	// Someone else creates c1 again after our read...
	if _, err := s.Append(ctx, []core.Message{core.NewMessage(CourseCreated{CourseID: "c1", CourseName: "Algebra II"})}, shell.AppendOptions{}); err != nil {
		log.Fatal(err)
	}
	// ... so our append, guarded by the read, is rejected.
	_, err = s.Append(ctx, []core.Message{core.NewMessage(CourseCreated{CourseID: "c1", CourseName: "Geometry"})}, shell.AppendOptions{Guard: &read.Guard})
	fmt.Println(err)
	// Output:
	// appended at [1 2]
	// read 1: courses.created {CourseID:c1 CourseName:Algebra}
	// sourced: concurrent append: 1 conflicting message(s) after position 2; courses.created at 3
}
