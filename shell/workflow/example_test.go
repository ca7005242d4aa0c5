package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/memstore"
	"github.com/sourced-go/sourced/shell/workflow"
)

// The manual's GreetingTask (the README's workflow example): two steps,
// the second retried; the run is driven by the runtime's workers.
func ExampleDefine() {
	attempts := 0
	greeting := workflow.Define("greeting_task", func(w *workflow.Workflow, name string) (string, error) {
		ip, err := workflow.Step(w, "resolve_ip", func(ctx context.Context) (string, error) {
			return "203.0.113.7", nil // IPResolver.resolve
		})
		if err != nil {
			return "", err
		}
		location, err := workflow.Step(w, "geolocate", func(ctx context.Context) (string, error) {
			if attempts++; attempts < 3 {
				return "", errors.New("geolocator busy")
			}
			return "Lisbon", nil // Geolocator.locate(ip)
		}, workflow.Args(ip), workflow.Retries(3), workflow.Backoff(10*time.Millisecond, time.Second))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Hello %s, your IP is %s and its location is %s", name, ip, location), nil
	})

	ctx := context.Background()
	store := memstore.New(codec.NewRegistry()) // or sqlitestore.Install(ctx, "app.db", ...)
	rt, err := shell.NewRuntime(store, shell.DefaultConfig(), greeting)
	if err != nil {
		panic(err)
	}
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer rt.Stop(ctx)

	run, err := workflow.Start(ctx, store, greeting, "Ada")
	if err != nil {
		panic(err)
	}
	out, err := run.Wait(ctx)
	fmt.Println(out, err)

	info, _ := run.Load(ctx)
	for _, step := range info.Steps {
		fmt.Println(step.Name, step.Status, "after", step.Attempts, "attempt(s)")
	}
	// Output:
	// Hello Ada, your IP is 203.0.113.7 and its location is Lisbon <nil>
	// resolve_ip complete after 1 attempt(s)
	// geolocate complete after 3 attempt(s)
}
