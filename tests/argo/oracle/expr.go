package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/util/expr/argoexpr"
	"github.com/argoproj/argo-workflows/v4/util/template"
	_ "github.com/argoproj/argo-workflows/v4/workflow/cron" // linked below
)

// Argo's own unexported functions of workflow/cron/operator.go.

//go:linkname argoEvalWhen github.com/argoproj/argo-workflows/v4/workflow/cron.evalWhen
func argoEvalWhen(ctx context.Context, cron *v1alpha1.CronWorkflow) (bool, error)

//go:linkname argoShouldExecute github.com/argoproj/argo-workflows/v4/workflow/cron.shouldExecute
func argoShouldExecute(when string) (bool, error)

//go:linkname argoExpressionEnv github.com/argoproj/argo-workflows/v4/workflow/cron.expressionEnv
func argoExpressionEnv(cron *v1alpha1.CronWorkflow, addSetField func(name string, value interface{})) error

// variablePrefix is workflow/cron/operator.go's constant of the same name.
const variablePrefix = "cronworkflow"

// exprCase is one input line: evaluate Expression as the CronWorkflow's `when` ("when") or
// `stopStrategy.expression` ("stop"), with the variables Argo takes from CronWorkflow (name,
// namespace, labels, annotations, status.failed/succeeded/lastScheduledTime).
type exprCase struct {
	ID           json.RawMessage       `json:"id"`
	Kind         string                `json:"kind"`
	Expression   string                `json:"expression"`
	CronWorkflow v1alpha1.CronWorkflow `json:"cronWorkflow"`
	// Now, when given, is what now() returns (see pinNow); without it Argo reads the clock.
	Now *time.Time `json:"now,omitempty"`
}

type exprAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result *bool           `json:"result"`
	Error  *string         `json:"error"`
	// Exact is true when Argo's own function ran end to end (no now pinned, kind "when"
	// through evalWhen itself); false when our replica of its glue ran (see below).
	Exact bool `json:"exact"`
}

// runExpr answers one JSON line per input line, in order, so one process serves a whole test.
func runExpr(ctx context.Context, in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	enc := json.NewEncoder(out)
	line := 0
	for scanner.Scan() {
		line++
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var c exprCase
		if err := json.Unmarshal(scanner.Bytes(), &c); err != nil {
			return fmt.Errorf("input line %d: %w", line, err)
		}
		answer, err := evaluate(ctx, &c)
		if err != nil {
			return fmt.Errorf("input line %d: %w", line, err)
		}
		if err := enc.Encode(answer); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func evaluate(ctx context.Context, c *exprCase) (answer *exprAnswer, err error) {
	cron := c.CronWorkflow.DeepCopy()
	var result bool
	var exact bool
	// Argo's code panics on some inputs (the expr-lang and govaluate runtimes); the controller
	// would then crash and retry, so a panic is reported as an error of its own kind.
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("panic: %v", p)
			answer = &exprAnswer{ID: c.ID, Error: &msg, Exact: exact}
			err = nil
		}
	}()
	var evalErr error
	switch c.Kind {
	case "when":
		cron.Spec.When = c.Expression
		if c.Now == nil {
			exact = true
			result, evalErr = argoEvalWhen(ctx, cron)
		} else {
			result, evalErr = evalWhenAt(ctx, cron, *c.Now)
		}
	case "stop":
		cron.Spec.StopStrategy = &v1alpha1.StopStrategy{Expression: c.Expression}
		result, evalErr = checkStoppingCondition(cron, c.Now)
	default:
		return nil, fmt.Errorf("kind must be \"when\" or \"stop\", got %q", c.Kind)
	}
	if evalErr != nil {
		msg := evalErr.Error()
		return &exprAnswer{ID: c.ID, Error: &msg, Exact: exact}, nil
	}
	return &exprAnswer{ID: c.ID, Result: &result, Exact: exact}, nil
}

// pinNow adds a `now` function to an expression environment. expr-lang looks a name up in the
// environment before its builtins, so now() then returns `at` instead of reading the clock:
// the only change to Argo's evaluation, made so that a case has one right answer.
func pinNow(env map[string]interface{}, at time.Time) {
	env["now"] = func() time.Time { return at }
}

// evalWhenAt is a replica of operator.go's evalWhen (unexported glue of seven lines) with now()
// pinned; the parts that decide the result are Argo's own: template.NewTemplate/Replace,
// expressionEnv and shouldExecute (govaluate).
func evalWhenAt(ctx context.Context, cron *v1alpha1.CronWorkflow, at time.Time) (bool, error) {
	if cron.Spec.When == "" {
		return true, nil
	}
	t, err := template.NewTemplate(cron.Spec.When)
	if err != nil {
		return false, err
	}
	env := make(map[string]interface{})
	err = argoExpressionEnv(cron, func(name string, value interface{}) {
		env[fmt.Sprintf("%s.%s", variablePrefix, name)] = value
	})
	if err != nil {
		return false, err
	}
	pinNow(env, at)
	replaced, err := t.Replace(ctx, env, false)
	if err != nil {
		return false, err
	}
	return argoShouldExecute(replaced)
}

// checkStoppingCondition is a replica of operator.go's (*cronWfOperationCtx).checkStopingCondition,
// a method of an unexported type that cannot be linked: the environment comes from Argo's own
// expressionEnv and the evaluation is argoexpr.EvalBool, as there.
func checkStoppingCondition(cron *v1alpha1.CronWorkflow, at *time.Time) (bool, error) {
	if cron.Spec.StopStrategy == nil {
		return false, nil
	}
	prefixed := make(map[string]interface{})
	env := map[string]interface{}{variablePrefix: prefixed}
	if err := argoExpressionEnv(cron, func(name string, value interface{}) { prefixed[name] = value }); err != nil {
		return false, err
	}
	if at != nil {
		pinNow(env, *at)
	}
	stop, err := argoexpr.EvalBool(cron.Spec.StopStrategy.Expression, env)
	if err != nil {
		return false, fmt.Errorf("failed to evaluate stop expression: %w", err)
	}
	return stop, nil
}
