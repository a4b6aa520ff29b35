package main

// The Greeting custom resource (example.com/v1) as a kubebuilder project would type it: typed
// structs, so the informer cache holds what a real controller-runtime operator holds. The same
// structs serve any kind of that shape (bench:platform's Greeting0…Greeting9): the scheme maps the
// group/version/kind given on the command line to them, one kind per process.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type GreetingSpec struct {
	Message string `json:"message"`
}

type GreetingStatus struct {
	Phase              string             `json:"phase,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

type Greeting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GreetingSpec   `json:"spec,omitempty"`
	Status            GreetingStatus `json:"status,omitempty"`
}

type GreetingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Greeting `json:"items"`
}

func (in *Greeting) DeepCopyInto(out *Greeting) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	out.Status = in.Status
	if in.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

func (in *Greeting) DeepCopy() *Greeting {
	if in == nil {
		return nil
	}
	out := new(Greeting)
	in.DeepCopyInto(out)
	return out
}

func (in *Greeting) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *GreetingList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(GreetingList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Greeting, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// greetingTypes registers Greeting and GreetingList as `kind` and `kind`List of `gv`.
func greetingTypes(gv schema.GroupVersion, kind string) func(*runtime.Scheme) error {
	return func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypeWithName(gv.WithKind(kind), &Greeting{})
		scheme.AddKnownTypeWithName(gv.WithKind(kind+"List"), &GreetingList{})
		metav1.AddToGroupVersion(scheme, gv)
		return nil
	}
}
