package core

import "strings"

// AgentURI renders agent id as its agent:// URI on the hub whose host is
// host. A remote id, name@domain, whose domain is not host and is a host
// name with an optional port, renders as agent://domain/name, the URI its
// own system gives it (MAMP addresses remote agents so, and receivers'
// allowed_agents rules match remote senders by it); every other id renders
// as agent://host/id.
func AgentURI(host, id string) string {
	if i := strings.LastIndexByte(id, '@'); i > 0 && i < len(id)-1 {
		name, domain := id[:i], id[i+1:]
		if !strings.EqualFold(domain, host) && validDomainPort(domain) {
			return "agent://" + strings.ToLower(domain) + "/" + name
		}
	}
	return "agent://" + host + "/" + id
}

// validDomainPort reports whether d is a DNS host name with an optional
// :port (digits).
func validDomainPort(d string) bool {
	host := d
	if i := strings.LastIndexByte(d, ':'); i >= 0 {
		port := d[i+1:]
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return false
		}
		host = d[:i]
	}
	return ValidDomain(host)
}

// ValidDomain reports whether h is a DNS host name: dot-separated labels of
// 1 to 63 letters, digits, - and _, none starting or ending with -, 253
// characters at most.
func ValidDomain(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return false
			}
		}
	}
	return true
}
