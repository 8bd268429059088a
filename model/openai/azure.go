package openai

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/calf-go/calf/model"
)

// DefaultAzureAPIVersion is the api-version of Azure OpenAI's chat
// completions and embeddings when neither [AzureOptions.APIVersion] nor
// $OPENAI_API_VERSION says otherwise: the latest generally available
// version of the data plane's inference API.
const DefaultAzureAPIVersion = "2024-10-21"

// AzureOptions configures a model deployed on Azure OpenAI. With
// [Options.Azure] set, requests go to the deployment's URL,
// {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...
// (and .../embeddings for an [Embedder]); the Responses API
// ([NewResponses]) goes to Azure's v1 surface, {endpoint}/openai/v1/responses,
// with the deployment as the model and no api-version. The key is sent in
// the api-key header instead of Authorization: it is [Options.APIKey], by
// default $AZURE_OPENAI_API_KEY. Without a key, an Authorization header in
// [Options.Headers] (a Microsoft Entra ID bearer token) authenticates
// instead. [Options.BaseURL] does not apply.
type AzureOptions struct {
	// Endpoint is the resource's endpoint, such as
	// "https://my-resource.openai.azure.com". Default:
	// $AZURE_OPENAI_ENDPOINT.
	Endpoint string
	// Deployment is the name of the model's deployment. Default:
	// [Options.Model], for a deployment named after its model. Options.Model
	// still names the model in [Model.Name] and so prices its usage.
	Deployment string
	// APIVersion is the api-version of chat completions and embeddings.
	// Default: $OPENAI_API_VERSION, else DefaultAzureAPIVersion.
	APIVersion string
}

// resolveAzure fills e from opts.Azure and the environment.
func (e *endpoint) resolveAzure(opts Options) error {
	if opts.BaseURL != "" {
		return fmt.Errorf("openai: Options.BaseURL and Options.Azure do not go together: Azure's URLs come from AzureOptions.Endpoint")
	}
	az := *opts.Azure
	if az.Endpoint == "" {
		az.Endpoint = os.Getenv("AZURE_OPENAI_ENDPOINT")
	}
	if az.Endpoint == "" {
		return fmt.Errorf("%w: openai: Azure: set AzureOptions.Endpoint or AZURE_OPENAI_ENDPOINT (https://<resource>.openai.azure.com)", model.ErrNoModel)
	}
	if _, err := parseBase(az.Endpoint); err != nil {
		return err
	}
	az.Endpoint = strings.TrimRight(az.Endpoint, "/")
	if az.Deployment == "" {
		az.Deployment = opts.Model
	}
	if az.APIVersion == "" {
		az.APIVersion = os.Getenv("OPENAI_API_VERSION")
	}
	if az.APIVersion == "" {
		az.APIVersion = DefaultAzureAPIVersion
	}
	key := opts.APIKey
	if key == "" {
		key = os.Getenv("AZURE_OPENAI_API_KEY")
	}
	switch {
	case key != "":
		e.header.Set("Api-Key", key)
	case e.header.Get("Authorization") == "":
		return fmt.Errorf("%w: openai: Azure: set Options.APIKey or AZURE_OPENAI_API_KEY, or an Authorization header in Options.Headers", model.ErrNoModel)
	}
	e.azure = &az
	e.wireModel = az.Deployment
	// Azure's API takes max_completion_tokens since 2024-09-01-preview,
	// and its reasoning models reject max_tokens, as OpenAI's do.
	e.completionTokens = true
	return nil
}

// url returns the URL of an operation on Azure.
func (az *AzureOptions) url(op string) string {
	if op == "responses" {
		return az.Endpoint + "/openai/v1/responses"
	}
	return az.Endpoint + "/openai/deployments/" + url.PathEscape(az.Deployment) + "/" + op + "?api-version=" + url.QueryEscape(az.APIVersion)
}
