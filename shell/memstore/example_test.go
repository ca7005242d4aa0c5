package memstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
)

type CourseCreated struct {
	CourseName string `json:"course_name"`
}

func Example() {
	ctx := context.Background()
	reg := codec.NewRegistry()
	if err := codec.Register[CourseCreated](reg, "courses.created"); err != nil {
		panic(err)
	}
	store := memstore.New(reg)
	defer store.Close()

	// A decision reads the facts it needs and appends under the guard it got.
	algebra := []core.Condition{{Type: "courses.created", Attrs: map[string]string{"course_name": "Algebra"}}}
	read, _ := store.Read(ctx, algebra, shell.ReadOptions{})
	fmt.Println("courses named Algebra:", len(read.Messages))

	res, err := store.Append(ctx, []core.Message{core.NewMessage(CourseCreated{"Algebra"})}, shell.AppendOptions{Guard: &read.Guard})
	fmt.Println("appended at", res.Last, err)

	// A second decision made on the same read conflicts.
	_, err = store.Append(ctx, []core.Message{core.NewMessage(CourseCreated{"Algebra"})}, shell.AppendOptions{Guard: &read.Guard})
	var conflict *core.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("conflict with", conflict.Conflicts[0].Type, "at", conflict.Conflicts[0].Position)
	}
	// Output:
	// courses named Algebra: 0
	// appended at 1 <nil>
	// conflict with courses.created at 1
}
