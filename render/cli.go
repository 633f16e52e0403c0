package render

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// RunCLI is the `render` subcommand: it prints what the operator would apply for the
// RedisClusters of a file, as YAML documents separated by `---`, in apply order.
//
//	render -f FILE [--redis-conf FILE] [--operator-namespace NS]
func RunCLI(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file := fs.String("f", "", "YAML file with one or more RedisClusters (- for stdin)")
	confFile := fs.String("redis-conf", "", "redis.conf of the user ConfigMap named by spec.pod[0].configmap (the operator reads it from the cluster; default none)")
	operatorNS := fs.String("operator-namespace", "", "namespace of the operator's pods, which the NetworkPolicy admits (the operator's --operator-namespace; default none: the cluster's own namespace)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("failed to parse render flags: %w (usage: render -f FILE [--redis-conf FILE])", err)
	}
	if *file == "" || fs.NArg() > 0 {
		return fmt.Errorf("failed to parse render flags: usage: render -f FILE [--redis-conf FILE]")
	}
	var conf string
	if *confFile != "" {
		data, err := os.ReadFile(*confFile)
		if err != nil {
			return fmt.Errorf("failed to read %s: %w", *confFile, err)
		}
		conf = string(data)
	}
	r, err := defaultRenderer()
	if *operatorNS != "" {
		r, err = New(OperatorNamespace(*operatorNS))
	}
	if err != nil {
		return err
	}
	objs, err := r.RenderFile(*file, conf)
	if err != nil {
		return err
	}
	return WriteYAML(stdout, objs)
}

// WriteYAML writes objects as YAML documents separated by `---`.
func WriteYAML(w io.Writer, objs []*unstructured.Unstructured) error {
	var b bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("failed to encode %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		b.Write(data)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("failed to write objects: %w", err)
	}
	return nil
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
