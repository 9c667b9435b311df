package profiles

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// DefaultProfileHeader is the request header header-profile-handler reads by
// default.
const DefaultProfileHeader = "x-llm-d-profile"

// HeaderProfile is the header-profile-handler: it runs the profile named by
// a request header, or DefaultProfile when the request does not carry the
// header (or it is empty), and makes it primary. A header naming a profile
// that is not configured is an error wrapping scheduling.ErrUnknownProfile,
// never a silent fallback: a client asking for a policy that does not exist
// should learn so. A request without the header and no DefaultProfile is an
// error too.
type HeaderProfile struct {
	Header         string `json:"header" doc:"request header naming the profile to run (case-insensitive)"`
	DefaultProfile string `json:"defaultProfile,omitempty" doc:"profile to run when the request does not carry the header; empty: such requests fail"`

	lower string // the header name lower-cased by Init
}

var (
	_ scheduling.ProfileHandler = (*HeaderProfile)(nil)
	_ plugins.Initializer       = (*HeaderProfile)(nil)
)

// SetDefaults sets Header to DefaultProfileHeader.
func (h *HeaderProfile) SetDefaults() { h.Header = DefaultProfileHeader }

// Validate rejects an empty header name.
func (h *HeaderProfile) Validate() error {
	if strings.TrimSpace(h.Header) == "" {
		return errors.New("header-profile-handler: header: must not be empty")
	}
	return nil
}

// CheckProfiles reports an error when DefaultProfile is set but is not one
// of the configured profiles.
func (h *HeaderProfile) CheckProfiles(profiles []string) error {
	if h.DefaultProfile != "" && !slices.Contains(profiles, h.DefaultProfile) {
		return fmt.Errorf("header-profile-handler: defaultProfile: %w %q (configured: %s)",
			scheduling.ErrUnknownProfile, h.DefaultProfile, strings.Join(profiles, ", "))
	}
	return nil
}

// Init lower-cases the header name once, as request header names are.
func (h *HeaderProfile) Init(context.Context, plugins.Deps) error {
	h.lower = h.normalized()
	return nil
}

func (h *HeaderProfile) header() string {
	if h.lower != "" {
		return h.lower
	}
	return h.normalized() // Init was not called
}

func (h *HeaderProfile) normalized() string {
	if name := strings.ToLower(strings.TrimSpace(h.Header)); name != "" {
		return name
	}
	return DefaultProfileHeader
}

// Handle implements scheduling.ProfileHandler.
func (h *HeaderProfile) Handle(ctx context.Context, req *scheduling.Request, profiles []string, run scheduling.RunProfileFunc) (string, error) {
	header := h.header()
	name, fromHeader := strings.TrimSpace(req.Headers[header]), true
	if name == "" {
		if h.DefaultProfile == "" {
			return "", fmt.Errorf("header-profile-handler: request has no %s header and no defaultProfile is configured (profiles: %s)",
				header, strings.Join(profiles, ", "))
		}
		name, fromHeader = h.DefaultProfile, false
	}
	if !slices.Contains(profiles, name) {
		from := "defaultProfile"
		if fromHeader {
			from = "header " + header
		}
		return "", fmt.Errorf("header-profile-handler: %s: %w %q (configured: %s)",
			from, scheduling.ErrUnknownProfile, name, strings.Join(profiles, ", "))
	}
	if _, err := run(ctx, name); err != nil {
		return "", err
	}
	return name, nil
}
