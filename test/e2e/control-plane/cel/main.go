// node-policy-cel: the node-status policy (k8s/node-policy/policy.yaml) evaluated by
// kube-apiserver's own MutatingAdmissionPolicy admission plugin (k8s.io/apiserver
// .../policy/mutating, the pinned release of this module), outside an API server, for
// src/node-policy/node-policy.cel.spec.ts.
//
// It loads the shipped policy and its 16 bindings as kube-apiserver stores them (decoded and
// defaulted by the release's own scheme) and the webhook's nodes matchCondition of
// k8s/node-policy/kustomization.yaml, then answers one case per line on stdin with one JSON line on
// stdout:
//
//	in:  {"object": Node, "oldObject": Node, "username": "system:node:n", "groups": [...],
//	      "params": {"kube-overcommit-node-targets-07": {"<node>": "<entry>"}, ...}}
//	out: {"object": Node, "oldObject": Node, "mutated": Node, "webhookCalled": bool}
//	     or {"error": "..."}
//
// `params` are the shard ConfigMaps that exist for the case (their data); any other is absent.
// `object` and `oldObject` are the Nodes as kube-apiserver decodes them (defaulted, quantities and
// times in its encoding): what the webhook would be sent. `mutated` is the Node after the policy,
// `webhookCalled` the verdict of the webhook's matchCondition on it.
//
// The plugin runs as in kube-apiserver (matching, each binding's paramRef by name, the match
// condition per shard, the variables, the JSONPatch mutation, decoding the patched Node back)
// with one difference: the policy's and the matchCondition's failurePolicy are Fail instead of
// Ignore, so that an evaluation error is reported instead of silently leaving the write to the
// webhook.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"sigs.k8s.io/yaml"

	// The release's own types, conversions and defaults, as kube-apiserver registers them.
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

var (
	nodeKind    = corev1.SchemeGroupVersion.WithKind("Node")
	nodeGVR     = corev1.SchemeGroupVersion.WithResource("nodes")
	objectIface = admission.NewObjectInterfacesFromScheme(legacyscheme.Scheme)
)

func main() {
	policyFile := flag.String("policy", "k8s/node-policy/policy.yaml", "the MutatingAdmissionPolicy and its bindings")
	kustomization := flag.String("kustomization", "k8s/node-policy/kustomization.yaml", "the component whose patch gives the webhook's nodes matchConditions")
	flag.Parse()
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)

	h, err := newHarness(*policyFile, *kustomization)
	if err != nil {
		fmt.Fprintf(os.Stderr, "node-policy-cel: %v\n", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		res, err := h.evaluate(in.Bytes())
		if err != nil {
			res = map[string]any{"error": err.Error()}
		}
		line, _ := json.Marshal(res)
		out.Write(append(line, '\n'))
		out.Flush()
	}
}

type harness struct {
	ctx        context.Context
	plugin     *mutating.Plugin
	client     *fake.Clientset
	configMaps listersv1.ConfigMapLister
	namespace  string
	shards     map[string]map[string]string
	webhook    matchconditions.Matcher
	authz      authorizer.Authorizer
}

// allow is the authorizer of the plugin's `authorizer` variable, which the policy does not read.
type allow struct{}

func (allow) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}
func (a allow) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}
func (allow) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// A clientset whose discovery serves the OpenAPI v3 schemas embedded in client-go (core/v1 among
// them): the plugin's type converter reads the Node's schema there.
type clientset struct{ *fake.Clientset }

func (c clientset) Discovery() discovery.DiscoveryInterfaces {
	return openAPIDiscovery{c.Clientset.Discovery()}
}

type openAPIDiscovery struct{ discovery.DiscoveryInterfaces }

func (openAPIDiscovery) OpenAPIV3() openapi.Client { return openapitest.NewEmbeddedFileClient() }

func newHarness(policyFile, kustomization string) (*harness, error) {
	policy, bindings, err := loadPolicy(policyFile)
	if err != nil {
		return nil, err
	}
	fail := admissionregistrationv1.Fail
	policy.Spec.FailurePolicy = &fail
	if len(bindings) == 0 || bindings[0].Spec.ParamRef == nil {
		return nil, fmt.Errorf("%s: no binding with a paramRef", policyFile)
	}
	namespace := bindings[0].Spec.ParamRef.Namespace
	objects := []runtime.Object{policy, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}}
	for _, b := range bindings {
		objects = append(objects, b)
	}
	client := fake.NewSimpleClientset(objects...)

	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	mapper.Add(nodeKind, meta.RESTScopeRoot)
	factory := informers.NewSharedInformerFactory(client, 0)
	configMaps := factory.Core().V1().ConfigMaps()
	configMaps.Informer() // registered before Start: the plugin's param informer is this one
	// Never cancelled: the harness serves until stdin closes.
	ctx, _ := context.WithCancel(context.Background())

	plugin, err := mutating.NewPlugin(nil)
	if err != nil {
		return nil, err
	}
	initializer.New(clientset{client}, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), factory, allow{},
		utilfeature.DefaultFeatureGate, compatibility.DefaultBuildEffectiveVersion(), ctx.Done(), mapper).Initialize(plugin)
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	hook, err := webhookMatchConditions(kustomization)
	if err != nil {
		return nil, err
	}
	compiler := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	h := &harness{
		ctx: ctx, plugin: plugin, client: client, configMaps: configMaps.Lister(), namespace: namespace,
		shards: map[string]map[string]string{}, authz: allow{},
		// As the webhook plugin compiles a webhook's matchConditions (generic/webhook.go).
		webhook: webhook.NewMutatingWebhookAccessor("nodes", "kube-overcommit", hook).GetCompiledMatcher(compiler),
	}
	if !waitFor(10*time.Second, plugin.WaitForReady) {
		return nil, errors.New("the plugin's policy source did not sync")
	}
	return h, nil
}

// loadPolicy reads the policy and its bindings, defaulted as kube-apiserver stores them.
func loadPolicy(file string) (*admissionregistrationv1.MutatingAdmissionPolicy, []*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var policy *admissionregistrationv1.MutatingAdmissionPolicy
	var bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(text)))
	for {
		doc, err := docs.Read()
		if err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, err
		}
		var kind struct{ Kind string }
		if err := yaml.Unmarshal(doc, &kind); err != nil {
			return nil, nil, err
		}
		switch kind.Kind {
		case "MutatingAdmissionPolicy":
			policy = &admissionregistrationv1.MutatingAdmissionPolicy{}
			err = yaml.UnmarshalStrict(doc, policy)
			legacyscheme.Scheme.Default(policy)
		case "MutatingAdmissionPolicyBinding":
			binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			err = yaml.UnmarshalStrict(doc, binding)
			legacyscheme.Scheme.Default(binding)
			bindings = append(bindings, binding)
		case "":
		default:
			err = fmt.Errorf("%s: unexpected kind %s", file, kind.Kind)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if policy == nil {
		return nil, nil, fmt.Errorf("%s: no MutatingAdmissionPolicy", file)
	}
	return policy, bindings, nil
}

// webhookMatchConditions reads the nodes webhook's matchConditions from the component's patch.
func webhookMatchConditions(file string) (*admissionregistrationv1.MutatingWebhook, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var component struct {
		Patches []struct {
			Target struct{ Kind string }
			Patch  string
		}
	}
	if err := yaml.Unmarshal(text, &component); err != nil {
		return nil, err
	}
	for _, p := range component.Patches {
		if p.Target.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		var ops []struct {
			Op, Path string
			Value    json.RawMessage
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			return nil, err
		}
		hook := &admissionregistrationv1.MutatingWebhook{}
		for _, op := range ops {
			switch {
			case op.Op == "test" && op.Path == "/webhooks/0/name":
				err = json.Unmarshal(op.Value, &hook.Name)
			case op.Op == "add" && op.Path == "/webhooks/0/matchConditions":
				err = json.Unmarshal(op.Value, &hook.MatchConditions)
			}
			if err != nil {
				return nil, err
			}
		}
		if len(hook.MatchConditions) > 0 {
			fail := admissionregistrationv1.Fail
			hook.FailurePolicy = &fail
			return hook, nil
		}
	}
	return nil, fmt.Errorf("%s: no patch adding the webhook's matchConditions", file)
}

type request struct {
	Object    json.RawMessage              `json:"object"`
	OldObject json.RawMessage              `json:"oldObject"`
	Username  string                       `json:"username"`
	Groups    []string                     `json:"groups"`
	Params    map[string]map[string]string `json:"params"`
}

func (h *harness) evaluate(line []byte) (map[string]any, error) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, err
	}
	if err := h.setShards(req.Params); err != nil {
		return nil, err
	}
	object, err := decodeNode(req.Object)
	if err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	oldObject, err := decodeNode(req.OldObject)
	if err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	sentObject, sentOld := encodeNode(object), encodeNode(oldObject)
	attrs := admission.NewAttributesRecord(object, oldObject, nodeKind, "", object.Name, nodeGVR, "status", admission.Update,
		&metav1.UpdateOptions{}, false, &user.DefaultInfo{Name: req.Username, Groups: req.Groups})
	// The plugin's type converter reads the Node's schema in the background after start: until it
	// has, the plugin answers 503 without evaluating anything.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err = h.plugin.Admit(h.ctx, attrs, objectIface)
		if err == nil || !apierrors.IsServiceUnavailable(err) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	versioned, err := admission.NewVersionedAttributes(attrs, nodeKind, objectIface)
	if err != nil {
		return nil, err
	}
	match := h.webhook.Match(h.ctx, versioned, nil, h.authz)
	if match.Error != nil {
		return nil, fmt.Errorf("webhook matchCondition: %w", match.Error)
	}
	return map[string]any{"object": sentObject, "oldObject": sentOld, "mutated": encodeNode(object), "webhookCalled": match.Matches}, nil
}

// decodeNode decodes a Node as kube-apiserver does a request body or a stored object: into the
// internal type, defaulted.
func decodeNode(data json.RawMessage) (*api.Node, error) {
	external := &corev1.Node{}
	if err := json.Unmarshal(data, external); err != nil {
		return nil, err
	}
	legacyscheme.Scheme.Default(external)
	internal := &api.Node{}
	if err := legacyscheme.Scheme.Convert(external, internal, nil); err != nil {
		return nil, err
	}
	return internal, nil
}

// encodeNode is the Node as kube-apiserver serializes it in v1.
func encodeNode(node *api.Node) json.RawMessage {
	external := &corev1.Node{}
	if err := legacyscheme.Scheme.Convert(node, external, nil); err != nil {
		panic(err)
	}
	external.APIVersion, external.Kind = nodeKind.ToAPIVersionAndKind()
	data, err := json.Marshal(external)
	if err != nil {
		panic(err)
	}
	return data
}

// setShards makes the shard ConfigMaps those of the case, and waits until the plugin's param
// informer holds them.
func (h *harness) setShards(params map[string]map[string]string) error {
	configMaps := h.client.CoreV1().ConfigMaps(h.namespace)
	for name := range h.shards {
		if _, ok := params[name]; !ok {
			if err := configMaps.Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			delete(h.shards, name)
		}
	}
	for name, data := range params {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.namespace}, Data: data}
		previous, exists := h.shards[name]
		var err error
		switch {
		case !exists:
			_, err = configMaps.Create(h.ctx, cm, metav1.CreateOptions{})
		case !reflect.DeepEqual(previous, data):
			_, err = configMaps.Update(h.ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			return err
		}
		h.shards[name] = data
	}
	synced := func() bool {
		all, err := h.configMaps.ConfigMaps(h.namespace).List(labels.Everything())
		if err != nil || len(all) != len(h.shards) {
			return false
		}
		for _, cm := range all {
			if want, ok := h.shards[cm.Name]; !ok || !sameData(cm.Data, want) {
				return false
			}
		}
		return true
	}
	if !waitFor(10*time.Second, synced) {
		return errors.New("the param informer did not see the shards")
	}
	return nil
}

func sameData(a, b map[string]string) bool {
	return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b)
}

func waitFor(timeout time.Duration, done func() bool) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
		if done() {
			return true
		}
	}
	return false
}
