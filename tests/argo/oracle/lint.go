package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/argoproj/argo-workflows/v4/cmd/argo/lint"
	"github.com/argoproj/argo-workflows/v4/pkg/apiclient"
	wf "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow"
	"github.com/argoproj/argo-workflows/v4/util/logging"
)

// lintVerdict is Argo's verdict on one file, as `argo cron lint --strict FILE` would give it.
type lintVerdict struct {
	File string `json:"file"`
	// OK is true when `argo cron lint` would exit 0 on this file alone.
	OK bool `json:"ok"`
	// Linted is false when the file holds no CronWorkflow (Argo then fails: nothing to lint).
	Linted bool `json:"linted"`
	// Errors are Argo's messages, one per invalid object, without the "FILE: " prefix.
	Errors []string `json:"errors"`
	// Output is everything RunLint printed with the "simple" formatter.
	Output string `json:"output"`
}

// runLint lints each file on its own (its own offline client, so a WorkflowTemplate in the same
// file is visible, as with `argo lint --offline FILE`) through lint.RunLint, the function behind
// `argo cron lint`, with kinds cronworkflows and strict parsing.
func runLint(ctx context.Context, files []string, out io.Writer) error {
	if len(files) == 0 {
		return fmt.Errorf("lint needs at least one FILE")
	}
	enc := json.NewEncoder(out)
	for _, file := range files {
		verdict, err := lintOne(ctx, file)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := enc.Encode(verdict); err != nil {
			return err
		}
	}
	return nil
}

func lintOne(ctx context.Context, file string) (*lintVerdict, error) {
	exitCode := 0
	// RunLint ends the process through the exit function when linting fails; capture it.
	logging.SetExitFunc(func(code int) { exitCode = code })
	defer logging.SetExitFunc(nil)

	ctx, client, err := apiclient.NewClientFromOptsWithContext(ctx, apiclient.Opts{Offline: true, OfflineFiles: []string{file}})
	if err != nil {
		// The offline client parses every file first; a file it cannot parse fails the lint.
		return &lintVerdict{File: file, OK: false, Errors: []string{err.Error()}, Output: err.Error()}, nil
	}
	var buf bytes.Buffer
	opts := lint.LintOptions{Files: []string{file}, Strict: true, DefaultNamespace: "default", Printer: &buf}
	if err := lint.RunLint(ctx, client, []string{wf.CronWorkflowPlural}, "simple", true, opts); err != nil {
		return &lintVerdict{File: file, OK: false, Errors: []string{err.Error()}, Output: err.Error()}, nil
	}
	verdict := &lintVerdict{File: file, OK: exitCode == 0, Errors: []string{}, Output: buf.String()}
	prefix := file + ": "
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(line, prefix) {
			verdict.Errors = append(verdict.Errors, strings.TrimPrefix(line, prefix))
		}
	}
	verdict.Linted = !strings.Contains(buf.String(), "found nothing to lint")
	return verdict, nil
}
