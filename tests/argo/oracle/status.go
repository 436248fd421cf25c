package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	_ "unsafe" // for go:linkname

	_ "github.com/argoproj/argo-workflows/v4/cmd/argo/commands/cron" // linked below
	"github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	argojson "github.com/argoproj/argo-workflows/v4/util/json"
)

// getCronWorkflowGet is the function behind `argo cron get NAME` (default output).
//
//go:linkname getCronWorkflowGet github.com/argoproj/argo-workflows/v4/cmd/argo/commands/cron.getCronWorkflowGet
func getCronWorkflowGet(ctx context.Context, cwf *v1alpha1.CronWorkflow) string

type statusAnswer struct {
	// Get is exactly what `argo cron get` prints for this object.
	Get string `json:"get"`
	// Status is the decoded .status, encoded again by Argo's types (what Argo understood).
	Status v1alpha1.CronWorkflowStatus `json:"status"`
}

// runStatus decodes one CronWorkflow (JSON) with Argo's Go types, strictly (an unknown field
// anywhere is an error, as `argo cron lint --strict` parses), and prints what `argo cron get`
// would show for it.
func runStatus(ctx context.Context, in io.Reader, out io.Writer) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var cwf v1alpha1.CronWorkflow
	if err := argojson.Unmarshal(data, &cwf, argojson.DisallowUnknownFields); err != nil {
		return fmt.Errorf("decoding the CronWorkflow with Argo's types: %w", err)
	}
	return json.NewEncoder(out).Encode(statusAnswer{Get: getCronWorkflowGet(ctx, &cwf), Status: cwf.Status})
}
