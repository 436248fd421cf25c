// Command cronhash answers, one JSON line per JSON line on stdin, what Argo's PR #16604
// (package cronhash, see NOTICE) resolves a schedule to for a CronWorkflow:
//
//	in:  {"id": 0, "schedule": "H H * * *", "namespace": "argo", "name": "my-cron-wf"}
//	out: {"id": 0, "expanded": "9 6 * * *"}  or  {"id": 0, "error": "..."}
//
// It is the oracle of tests/test_argo_cronhash_differential.py; scripts/build-argo-cronhash.sh
// builds it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"cronsource.test/argo/cronhash/cronhash"
)

type request struct {
	ID        int    `json:"id"`
	Schedule  string `json:"schedule"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type answer struct {
	ID       int     `json:"id"`
	Expanded *string `json:"expanded,omitempty"`
	Error    *string `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "cronhash: bad request %q: %v\n", in.Text(), err)
			os.Exit(2)
		}
		a := answer{ID: req.ID}
		expanded, err := cronhash.Expand(req.Schedule, req.Namespace, req.Name)
		if err != nil {
			msg := err.Error()
			a.Error = &msg
		} else {
			a.Expanded = &expanded
		}
		if err := enc.Encode(a); err != nil {
			fmt.Fprintf(os.Stderr, "cronhash: %v\n", err)
			os.Exit(2)
		}
		// A caller may ask one question at a time and wait for each answer.
		if err := out.Flush(); err != nil {
			fmt.Fprintf(os.Stderr, "cronhash: %v\n", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "cronhash: %v\n", err)
		os.Exit(2)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "cronhash: %v\n", err)
		os.Exit(2)
	}
}
