class _Matmul:
    allow_tf32 = True


class cuda:
    matmul = _Matmul()


class cudnn:
    allow_tf32 = True
