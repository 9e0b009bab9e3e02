package main

import (
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
)

// Compile-time checks that the adapters satisfy the ports service declares.
var (
	_ service.Transactor      = (*repository.Transactor)(nil)
	_ service.CustomerStore   = (*repository.CustomerStore)(nil)
	_ service.OrderStore      = (*repository.OrderStore)(nil)
	_ service.AttemptStore    = (*repository.AttemptStore)(nil)
	_ service.RecordStore     = (*repository.RecordStore)(nil)
	_ service.PaymentProvider = (*provider.Client)(nil)
)
