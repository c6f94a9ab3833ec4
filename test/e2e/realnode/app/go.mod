module envtest/realnode-app

go 1.24
