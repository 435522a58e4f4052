// Oracle for tests/api/test_quantity.py: reads quantity strings (one a line) and prints what
// k8s.io/apimachinery resource.ParseQuantity makes of them (ok, AsInt64, exact value) as JSON lines,
// then for every pair that parsed "CMP <q.Cmp(r)> <q> <r>", "ADD <AsInt64 or null> <AsDec> <q> <r>" (q.Add(r))
// and "SUB ..." (q.Sub(r)). Offline: GOFLAGS=-mod=mod GOPROXY=off.

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

type out struct {
	S     string `json:"s"`
	Ok    bool   `json:"ok"`
	Int   *int64 `json:"int"`
	Dec   string `json:"dec"`
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	var qs []resource.Quantity
	var strs []string
	for sc.Scan() {
		s := sc.Text()
		q, err := resource.ParseQuantity(s)
		o := out{S: s, Ok: err == nil}
		if err == nil {
			if v, ok := q.AsInt64(); ok {
				o.Int = &v
			}
			c := q.DeepCopy()
			o.Dec = c.AsDec().String()
			qs = append(qs, q)
			strs = append(strs, s)
		}
		b, _ := json.Marshal(o)
		fmt.Println(string(b))
	}
	for i := range qs {
		for j := range qs {
			// Every operation on fresh copies: Cmp and AsDec turn their receiver into an inf.Dec in place.
			a, b := qs[i].DeepCopy(), qs[j].DeepCopy()
			fmt.Printf("CMP %d %s %s\n", a.Cmp(b), strs[i], strs[j])
			sum := qs[i].DeepCopy()
			sum.Add(qs[j])
			diff := qs[i].DeepCopy()
			diff.Sub(qs[j])
			fmt.Printf("ADD %s %s %s %s\n", asInt(sum), exact(sum), strs[i], strs[j])
			fmt.Printf("SUB %s %s %s %s\n", asInt(diff), exact(diff), strs[i], strs[j])
		}
	}
}

func exact(q resource.Quantity) string {
	c := q.DeepCopy()
	return c.AsDec().String()
}

func asInt(q resource.Quantity) string {
	if v, ok := q.AsInt64(); ok {
		return fmt.Sprint(v)
	}
	return "null"
}
