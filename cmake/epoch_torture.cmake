# cmake/epoch_torture.cmake -- (being written: issue 4)
