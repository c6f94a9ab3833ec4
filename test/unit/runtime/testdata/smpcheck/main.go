package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

type tc struct {
	Original json.RawMessage `json:"original"`
	Patch    json.RawMessage `json:"patch"`
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c tc
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			panic(err)
		}
		out, err := strategicpatch.StrategicMergePatch(c.Original, c.Patch, corev1.PodTemplateSpec{})
		if err != nil {
			fmt.Println(`{"error":` + fmt.Sprintf("%q", err.Error()) + `}`)
			continue
		}
		fmt.Println(string(out))
	}
}
