// Command oracle answers questions about CronWorkflows with Argo Workflows v4.0.5's own code, so
// that cronsource's differential tests compare against Argo itself rather than against our
// reading of it. It is a test-only peer: never shipped, never deployed.
//
//	oracle lint FILE...   one JSON line per file: {"file", "ok", "linted", "errors", "output"}
//	oracle expr           JSON lines on stdin -> one JSON line per case on stdout (see expr.go)
//	oracle status         a CronWorkflow JSON on stdin -> the fields `argo cron get` shows (see status.go)
//
// Unexported Argo functions are reached with //go:linkname (the build passes
// -ldflags=-checklinkname=0); where a few lines of glue had to be replicated, expr.go says which.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/argoproj/argo-workflows/v4/util/logging"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: oracle lint FILE... | oracle expr | oracle status")
		os.Exit(2)
	}
	// Argo's code requires a logger in the context; errors only, on stderr, so that stdout
	// carries nothing but answers.
	ctx := logging.WithLogger(context.Background(), logging.NewSlogLogger(logging.Error, logging.Text))
	var err error
	switch os.Args[1] {
	case "lint":
		err = runLint(ctx, os.Args[2:], os.Stdout)
	case "expr":
		err = runExpr(ctx, os.Stdin, os.Stdout)
	case "status":
		err = runStatus(ctx, os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown subcommand %q (lint, expr, status)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(2)
	}
}
