// promcheck: the checks of Prometheus's own code that the monitoring files of deploy/ need,
// without promtool's module graph (every service discovery of Prometheus, about 1.8 GB of
// modules and ten minutes of compiling on 2 cores; scripts/build-promcheck.sh says more).
//
//	promcheck rules FILE...   what `promtool check rules FILE...` does: each file parsed and
//	                          validated by model/rulefmt (strict fields, PromQL of every expr,
//	                          the Go templates of labels and annotations), then promtool's lint
//	                          of duplicate rules; the same output and exit codes (0, 1)
//	promcheck exprs           a JSON array of PromQL expressions on stdin; prints a JSON array
//	                          of {"expr", "error", "metrics"}: the parser's error, or the metric
//	                          names the expression selects (exit 0 either way; 2 on bad input)
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// promtool's parser: the default options (no experimental functions).
var promParser = parser.NewParser(parser.Options{})

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "rules":
		if len(os.Args) < 3 {
			usage()
		}
		os.Exit(checkRules(os.Args[2:]))
	case "exprs":
		os.Exit(exprs(os.Stdin, os.Stdout))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: promcheck rules FILE... | promcheck exprs < exprs.json")
	os.Exit(2)
}

// checkRules follows cmd/promtool's checkRules and checkRuleGroups (strict fields, UTF-8 name
// validation as promtool's default, duplicate rules fatal).
func checkRules(files []string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	failed := false
	for _, f := range files {
		fmt.Println("Checking", f)
		rgs, errs := rulefmt.ParseFile(f, false, model.UTF8Validation, promParser, logger)
		if errs != nil {
			failed = true
			fmt.Fprintln(os.Stderr, "  FAILED:")
			for _, e := range errs {
				fmt.Fprintln(os.Stderr, e.Error())
			}
			continue
		}
		if dups := duplicates(rgs.Groups); len(dups) > 0 {
			failed = true
			fmt.Fprintln(os.Stderr, "  FAILED:")
			fmt.Fprintf(os.Stderr, "%d duplicate rule(s) found.\n", len(dups))
			for _, d := range dups {
				fmt.Fprintf(os.Stderr, "Metric: %s\n", d)
			}
			continue
		}
		n := 0
		for _, g := range rgs.Groups {
			n += len(g.Rules)
		}
		fmt.Printf("  SUCCESS: %d rules found\n\n", n)
	}
	if failed {
		return 1
	}
	return 0
}

// duplicates: rules with the same name (alert or record) and the same labels, group labels
// included, as promtool's checkDuplicates finds them.
func duplicates(groups []rulefmt.RuleGroup) []string {
	seen := map[string]int{}
	var out []string
	for _, g := range groups {
		for _, r := range g.Rules {
			name := r.Alert
			if r.Record != "" {
				name = r.Record
			}
			merged := map[string]string{}
			for k, v := range g.Labels {
				merged[k] = v
			}
			for k, v := range r.Labels {
				merged[k] = v
			}
			key := name + labels.FromMap(merged).String()
			seen[key]++
			if seen[key] == 2 {
				out = append(out, key)
			}
		}
	}
	return out
}

type result struct {
	Expr    string   `json:"expr"`
	Error   string   `json:"error,omitempty"`
	Metrics []string `json:"metrics"`
}

func exprs(in io.Reader, out io.Writer) int {
	var list []string
	if err := json.NewDecoder(in).Decode(&list); err != nil {
		fmt.Fprintln(os.Stderr, "promcheck exprs: stdin is not a JSON array of strings:", err)
		return 2
	}
	results := make([]result, 0, len(list))
	for _, text := range list {
		r := result{Expr: text, Metrics: []string{}}
		expr, err := promParser.ParseExpr(text)
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Metrics, err = selected(expr)
			if err != nil {
				r.Error = err.Error()
			}
		}
		results = append(results, r)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, "promcheck exprs:", err)
		return 2
	}
	return 0
}

// selected: the metric names of every vector and matrix selector. A selector without an
// exact name (a regex on __name__) is an error: the names could not be checked.
func selected(expr parser.Expr) ([]string, error) {
	names := map[string]bool{}
	var bad []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if m.Type != labels.MatchEqual {
					bad = append(bad, vs.String())
				}
				name = m.Value
			}
		}
		if name != "" {
			names[name] = true
		}
		return nil
	})
	if len(bad) > 0 {
		return nil, errors.New("selector without an exact metric name: " + strings.Join(bad, ", "))
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
