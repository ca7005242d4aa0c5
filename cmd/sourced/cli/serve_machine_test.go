package cli

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/sqlitestore"
	"github.com/sourced-go/sourced/statechart"
)

type (
	OpenGate struct {
		GateID string `json:"gate_id" sourced:"required"`
	}
	GateRef struct {
		GateID string `json:"gate_id" sourced:"required"`
	}
	GateOpened struct {
		GateRef
		statechart.Move
	}
	GateClosed struct {
		GateRef
		statechart.Move
	}
)

// gates is a machine: a gate closed at first, opened by OpenGate.
func gates() statechart.Machine[struct{}] {
	opened := statechart.Declare[GateOpened]("opened")
	closed := statechart.Declare[GateClosed]("closed")
	return statechart.Machine[struct{}]{Group: "gates", PartitionBy: []string{"gate_id"}}.Chart(
		statechart.Initial(statechart.Command[OpenGate](opened)),
		statechart.Place(closed, statechart.Command[OpenGate](opened)),
		statechart.Place(opened),
	)
}

// 'sourced serve' of a tool built with WithReactors shows a machine's
// instance: the page reads the instance's state events, which the tool's
// store (opened raw, without the application's types) did not know (it
// answered "unknown message type").
func TestServeShowsAMachineInstance(t *testing.T) {
	ctx := context.Background()
	reg := codec.NewRegistry()
	codec.MustRegister[OpenGate](reg, "gates.open")
	m := gates()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlitestore.Install(ctx, db, sqlitestore.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shell.HandleMachine(ctx, s, m, OpenGate{GateID: "g1"}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"-db", db, "serve", "-addr", "127.0.0.1:0", "-read-only"}, &out, &errOut, WithReactors(SQLite(), reg, m))
	}()
	defer func() { cancel(); <-done }()
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		base = regexp.MustCompile(`http://[0-9.:]+/`).FindString(out.String())
	}
	if base == "" {
		t.Fatalf("no address printed: %q %q", out.String(), errOut.String())
	}
	res, err := http.Get(base + "machines/gates?partition=gate_id:g1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	page := string(body)
	if res.StatusCode != http.StatusOK || strings.Contains(page, "unknown message type") || !strings.Contains(page, "opened") {
		t.Fatalf("the machine page of gate g1: %d\n%s", res.StatusCode, page)
	}
}
