package a2a

import (
	"context"
	"net/http"
	"strings"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// GRPCService is the path prefix of the gRPC binding (A2A 1.0's service
// lf.a2a.v1.A2AService): its requests are served on the hub's own port,
// over HTTP/2 (h2c without TLS, h2 with it), behind the hub's
// authentication like every other route.
const GRPCService = "/" + "lf.a2a.v1.A2AService" + "/"

// newGRPC returns the SDK's gRPC binding (a2agrpc) as an HTTP handler,
// with interceptors for what the request types lose: an explicit
// pageSize 0 of ListTasks (the SDK's request cannot tell it from none),
// and the A2A-Version metadata (the SDK ignores it).
func newGRPC(h a2asrv.RequestHandler) http.Handler {
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcUnary), grpc.StreamInterceptor(grpcStream))
	a2agrpc.NewHandler(h).RegisterWith(srv)
	return srv
}

// grpcVersion refuses a request whose A2A-Version metadata names a
// version other than 1.0 (the gRPC binding is 1.0's).
func grpcVersion(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(strings.ToLower(sdk.SvcParamVersion)) {
		if got, err := ParseVersion(v); err != nil || got != V10 {
			return status.Errorf(codes.FailedPrecondition, "A2A-Version %q: the gRPC binding speaks 1.0 (VERSION_NOT_SUPPORTED)", v)
		}
	}
	return nil
}

// tenanted is a gRPC request that names its tenant.
type tenanted interface{ GetTenant() string }

type tenantKey struct{}

// withTenant keeps the tenant of a gRPC request in ctx: the SDK's
// conversion of some requests (CancelTask's) drops it.
func withTenant(ctx context.Context, req any) context.Context {
	if t, ok := req.(tenanted); ok && t.GetTenant() != "" {
		return context.WithValue(ctx, tenantKey{}, t.GetTenant())
	}
	return ctx
}

func grpcUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := grpcVersion(ctx); err != nil {
		return nil, err
	}
	ctx = withTenant(ctx, req)
	if l, ok := req.(*a2apb.ListTasksRequest); ok {
		if l.PageSize != nil && *l.PageSize == 0 {
			ctx = withZeroPageSize(ctx)
		}
		if l.HistoryLength != nil && *l.HistoryLength < 0 {
			// The SDK's conversion drops a negative historyLength.
			return nil, status.Error(codes.InvalidArgument, "historyLength must not be negative")
		}
	}
	return next(ctx, req)
}

func grpcStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	if err := grpcVersion(ss.Context()); err != nil {
		return err
	}
	return next(srv, &tenantStream{ServerStream: ss, ctx: ss.Context()})
}

// tenantStream is a server stream whose context keeps the tenant of the
// request it received (see withTenant).
type tenantStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *tenantStream) Context() context.Context { return s.ctx }

func (s *tenantStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.ctx = withTenant(s.ctx, m)
	}
	return err
}

// grpcEndpoint serves the gRPC binding's requests (POST
// /lf.a2a.v1.A2AService/…). The agent is the request's tenant (the
// card's gRPC interface names it).
func (s *Server) grpcEndpoint(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/grpc") {
		httperr.Write(w, http.StatusUnsupportedMediaType, httperr.CodeUnsupportedMediaType, "gRPC requests are sent with Content-Type: application/grpc")
		return
	}
	ctx := withVersion(withRequest(r.Context(), r, ""), V10)
	s.grpc.ServeHTTP(w, r.WithContext(ctx))
}
