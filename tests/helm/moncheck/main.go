// moncheck: the Prometheus Operator objects a chart renders (ServiceMonitor, PrometheusRule),
// decoded strictly into the operator's own Go types (pkg/apis/monitoring/v1). The test API
// server has no Prometheus Operator CRDs, so this stands in for its strict field validation:
// a misspelt or misplaced field, or a value of the wrong type, is an error.
//
//	moncheck FILE|-    a stream of YAML documents (`helm template` output); the documents of
//	                   group monitoring.coreos.com are checked, the others are skipped.
//	                   Prints one line per object checked; exit 1 when one fails, 2 on bad
//	                   input.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: moncheck FILE|-")
		os.Exit(2)
	}
	var in io.Reader = os.Stdin
	if os.Args[1] != "-" {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "moncheck:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	os.Exit(check(in))
}

func check(in io.Reader) int {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(in))
	failed := false
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "moncheck:", err)
			return 2
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			fmt.Fprintln(os.Stderr, "moncheck:", err)
			return 2
		}
		if meta.APIVersion != monitoringv1.SchemeGroupVersion.String() {
			continue
		}
		var obj interface{ GetName() string }
		switch meta.Kind {
		case monitoringv1.ServiceMonitorsKind:
			obj = &monitoringv1.ServiceMonitor{}
		case monitoringv1.PrometheusRuleKind:
			obj = &monitoringv1.PrometheusRule{}
		default:
			fmt.Printf("FAILED %s: not a kind this check knows\n", meta.Kind)
			failed = true
			continue
		}
		// UnmarshalStrict: unknown and duplicate fields are errors, as the API server's
		// fieldValidation=Strict makes them.
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			fmt.Printf("FAILED %s: %v\n", meta.Kind, err)
			failed = true
			continue
		}
		if err := validate(obj); err != nil {
			fmt.Printf("FAILED %s %s: %v\n", meta.Kind, obj.GetName(), err)
			failed = true
			continue
		}
		fmt.Printf("ok %s %s\n", meta.Kind, obj.GetName())
	}
	if failed {
		return 1
	}
	return 0
}

// validate: what the CRD's schema requires beyond field names and types.
func validate(obj any) error {
	switch o := obj.(type) {
	case *monitoringv1.ServiceMonitor:
		if _, err := metav1.LabelSelectorAsSelector(&o.Spec.Selector); err != nil {
			return fmt.Errorf("spec.selector: %w", err)
		}
		if len(o.Spec.Endpoints) == 0 {
			return errors.New("spec.endpoints: none")
		}
		for i, e := range o.Spec.Endpoints {
			if e.Port == "" && e.TargetPort == nil {
				return fmt.Errorf("spec.endpoints[%d]: neither port nor targetPort", i)
			}
		}
	case *monitoringv1.PrometheusRule:
		if len(o.Spec.Groups) == 0 {
			return errors.New("spec.groups: none")
		}
	}
	return nil
}
