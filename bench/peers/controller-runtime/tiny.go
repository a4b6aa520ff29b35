package main

// Tiny (bench.crdfn.dev/v1), the object `npm run bench:bridge` creates by the thousand:
// spec.n only. The no-op operator caches it typed, as a kubebuilder project would.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var tinyGroupVersion = schema.GroupVersion{Group: "bench.crdfn.dev", Version: "v1"}

type Tiny struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		N int64 `json:"n"`
	} `json:"spec,omitempty"`
}

type TinyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tiny `json:"items"`
}

func (in *Tiny) DeepCopyInto(out *Tiny) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (in *Tiny) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(Tiny)
	in.DeepCopyInto(out)
	return out
}

func (in *TinyList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(TinyList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Tiny, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func addTinyTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(tinyGroupVersion, &Tiny{}, &TinyList{})
	metav1.AddToGroupVersion(scheme, tinyGroupVersion)
	return nil
}
