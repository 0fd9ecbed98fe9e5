package webhooksig

import "net/http"

type httptestReq struct{ *http.Request }
